package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/names"
)

// Labels on every object a member writes into the broker namespace, so that any member can
// list "everything for namespace/name" or "everything from cluster X" with a label selector.
const (
	// LabelSourceCluster carries the id of the cluster that wrote the object.
	LabelSourceCluster = mcsv1beta1.LabelSourceCluster
	// LabelServiceNamespace carries the namespace of the exported Service.
	LabelServiceNamespace = "fleetslice.io/service-namespace"
	// LabelServiceName carries the name of the exported Service.
	LabelServiceName = "fleetslice.io/service-name"
)

const (
	// hashedNamePrefixMax keeps a hashed record name readable yet far below the 253 limit.
	hashedNamePrefixMax = 40
	// hashedNameDigestHexLen is 80 bits of SHA-256: collisions among the records of one
	// broker namespace are not a practical concern at that size.
	hashedNameDigestHexLen = 20
)

// RecordLabels returns the broker labels of the record (or endpoint copy) that cluster
// clusterID publishes for the Service namespace/name.
func RecordLabels(clusterID, namespace, name string) map[string]string {
	return map[string]string{
		LabelSourceCluster:    clusterID,
		LabelServiceNamespace: namespace,
		LabelServiceName:      name,
	}
}

// RecordName returns the deterministic name of the ServiceExportRecord that cluster clusterID
// publishes for the Service namespace/name.
//
// For valid inputs the name is "<clusterID>.<namespace>.<name>". Namespaces and Service names
// never contain dots, so reading the last two labels back gives the inputs: distinct triples
// get distinct names even though cluster ids may contain a dot. When the readable form would
// be invalid or longer than a DNS-1123 subdomain allows, the name is a sanitised prefix plus a
// hash of the inputs, joined by a single dot: two labels only, so it can never equal a
// readable name, which always has at least three.
func RecordName(clusterID, namespace, name string) string {
	if readableComponents(clusterID, namespace, name) {
		readable := clusterID + "." + namespace + "." + name
		if len(validation.IsDNS1123Subdomain(readable)) == 0 {
			return readable
		}
	}
	return hashedRecordName(clusterID, namespace, name)
}

func readableComponents(clusterID, namespace, name string) bool {
	return len(validation.IsDNS1123Subdomain(clusterID)) == 0 &&
		len(validation.IsDNS1123Label(namespace)) == 0 &&
		len(validation.IsDNS1123Label(name)) == 0
}

func hashedRecordName(clusterID, namespace, name string) string {
	digest := sha256.New()
	// Length prefixes keep ("ab","c") and ("a","bc") apart.
	for _, part := range []string{clusterID, namespace, name} {
		digest.Write([]byte(strconv.Itoa(len(part))))
		digest.Write([]byte{':'})
		digest.Write([]byte(part))
	}
	sum := hex.EncodeToString(digest.Sum(nil))[:hashedNameDigestHexLen]

	prefix := names.DNSLabelPart(clusterID+"-"+namespace+"-"+name, hashedNamePrefixMax)
	if prefix == "" {
		prefix = "record"
	}
	return prefix + "." + sum
}
