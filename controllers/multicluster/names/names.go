// Package names holds every rule by which the multi-cluster controllers name and label what
// they write: ServiceExportRecords and EndpointSlice copies in the broker, imported
// EndpointSlices and derived Services in members. Each name is deterministic, so every member
// and every restart finds the same object, and each rule is written here once.
package names

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

const (
	// hashedRecordPrefixMax keeps a hashed record name readable yet far below the 253 limit.
	hashedRecordPrefixMax = 40
	// hashedRecordDigestLen is 80 bits of SHA-256: collisions among the records of one broker
	// namespace are not a practical concern at that size.
	hashedRecordDigestLen = 20
	// hashedOwnedPartMax leaves room for "-" and the digest in the label after the owner's id.
	hashedOwnedPartMax = validation.DNS1123LabelMaxLength - 1 - hashedRecordDigestLen

	importedServicePartMax = 30
	importedClusterPartMax = 20
	importedDigestLen      = 12
	// importedReadableMax leaves room for "-" and the digest within a 63-byte DNS label, which
	// the two longest parts and their dash (51 bytes) would overrun by one.
	importedReadableMax = validation.DNS1123LabelMaxLength - 1 - importedDigestLen

	// DerivedPrefix starts every derived Service's name.
	DerivedPrefix = "derived-"
	// derivedDigestLen base32 characters keep 50 bits of the namespace/name digest: enough to
	// keep one namespace's imports apart, short enough to read.
	derivedDigestLen = 10
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// RecordLabels returns the broker labels of the record (or slice copy) that cluster clusterID
// publishes for the Service namespace/name, so that any member can list "everything for
// namespace/name" or "everything from cluster X" with a label selector.
func RecordLabels(clusterID, namespace, name string) map[string]string {
	return map[string]string{
		v1alpha1.LabelSourceCluster:    clusterID,
		v1alpha1.LabelServiceNamespace: namespace,
		v1alpha1.LabelServiceName:      name,
	}
}

// RecordName returns the name of the ServiceExportRecord that cluster clusterID publishes for
// the Service namespace/name.
//
// For valid inputs the name is "<clusterID>.<namespace>.<name>". Namespaces and Service names
// never contain dots, so reading the last two labels back gives the inputs: distinct triples
// get distinct names even though cluster ids may contain a dot. When the readable form would
// be invalid or longer than a DNS-1123 subdomain allows, the name is a hashed one of two
// labels only, so it can never equal a readable name, which always has at least three.
//
// Every name of a valid cluster id (a DNS-1123 label, as members' ids are) starts with
// "<clusterID>.", hashed or not: the broker's admission policy refuses a member a name that
// does not start with its own id, so no member can take a name another member will need.
func RecordName(clusterID, namespace, name string) string {
	if len(validation.IsDNS1123Subdomain(clusterID)) == 0 &&
		len(validation.IsDNS1123Label(namespace)) == 0 &&
		len(validation.IsDNS1123Label(name)) == 0 {
		readable := clusterID + "." + namespace + "." + name
		if len(validation.IsDNS1123Subdomain(readable)) == 0 {
			return readable
		}
	}
	sum := digest(hashedRecordDigestLen, clusterID, namespace, name)
	if len(validation.IsDNS1123Label(clusterID)) == 0 {
		// The owner's id, then one label: a readable cut of the rest and the digest.
		if part := labelPart(namespace+"-"+name, hashedOwnedPartMax); part != "" {
			return clusterID + "." + part + "-" + sum
		}
		return clusterID + "." + sum
	}
	// Ids that are no label never reach a broker (members validate theirs); they keep the
	// older form so that nothing already named by it changes.
	prefix := labelPart(clusterID+"-"+namespace+"-"+name, hashedRecordPrefixMax)
	if prefix == "" {
		prefix = "record"
	}
	return prefix + "." + sum
}

// BrokerCopyName returns the name of the broker copy of the local EndpointSlice sourceSlice
// of the Service's namespace. Copies follow the record rule, with the slice in place of the
// Service: a different kind, so a copy and a record may share a name.
func BrokerCopyName(clusterID, namespace, sourceSlice string) string {
	return RecordName(clusterID, namespace, sourceSlice)
}

// ImportedName returns the name of the imported slice made from the slice sourceSlice of
// cluster, for the Service service: a DNS-1123 label. The readable part is cut short and the
// digest of the full inputs keeps names of different sources apart.
func ImportedName(service, cluster, sourceSlice string) string {
	parts := make([]string, 0, 2)
	for _, p := range []struct {
		text string
		max  int
	}{{service, importedServicePartMax}, {cluster, importedClusterPartMax}} {
		if s := labelPart(p.text, p.max); s != "" {
			parts = append(parts, s)
		}
	}
	readable := strings.Join(parts, "-")
	if len(readable) > importedReadableMax {
		readable = strings.TrimRight(readable[:importedReadableMax], "-")
	}
	sum := digest(importedDigestLen, service, cluster, sourceSlice)
	if readable == "" {
		return sum
	}
	return readable + "-" + sum
}

// DerivedServiceName returns the name of the ClusterIP Service that backs the ServiceImport
// namespace/name: "derived-" and a digest of namespace/name. It cannot collide with the
// import's own name, which users may also use for a local Service, and it is a DNS-1035 label
// as Service names must be.
func DerivedServiceName(namespace, name string) string {
	// Namespaces never contain '/', so the joined text identifies the pair.
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return DerivedPrefix + lowerBase32.EncodeToString(sum[:])[:derivedDigestLen]
}

// ImportOfDerived returns the name of the ServiceImport a derived Service in namespace belongs
// to: the one its multicluster.kubernetes.io/service-name label names, provided the Service
// carries that import's derived name. The pair binds them rather than an owner reference, which
// would need the ServiceImport's UID before the ServiceImport can carry the Service's IPs, and
// would let deleting the ServiceImport garbage-collect its ClusterSetIP. A Service a user
// labels so under another name is not taken for one.
func ImportOfDerived(namespace, serviceName, importLabel string) (string, bool) {
	if importLabel == "" || serviceName != DerivedServiceName(namespace, importLabel) {
		return "", false
	}
	return importLabel, true
}

// digest returns the first n hex digits of the SHA-256 of parts. Length prefixes keep
// ("ab","c") and ("a","bc") apart.
func digest(n int, parts ...string) string {
	h := sha256.New()
	for _, part := range parts {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// labelPart lowercases s, turns anything outside [a-z0-9] into '-', cuts it to max bytes and
// trims dashes from both ends. Parts joined with '-' or '.' (and a digest) give a valid DNS-1123
// label or subdomain; the result may be "".
func labelPart(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= max {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
