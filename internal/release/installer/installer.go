// Package installer renders what a platform team applies: dist/install.yaml for a member cluster
// (kustomize's config/default plus the mcs-api CRDs, images substituted), dist/broker.yaml for a
// ClusterSet's broker, and a Helm chart that renders the member's objects.
package installer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	sigyaml "sigs.k8s.io/yaml"

	fleetslicecrd "github.com/fleetslice/fleetslice/config/crd"
)

// Container names whose image the installer sets.
const (
	ManagerContainer = "manager"
	AgentContainer   = "agent"
	DNSContainer     = "dns"
	// Namespace is where config/default installs fleetslice.
	Namespace = "fleetslice-system"
)

// Options say where the sources are and which images the installer names.
type Options struct {
	// Root is the repository's top directory (config/ lives there).
	Root string
	// Kustomize is the kustomize binary.
	Kustomize string
	// ManagerImage, AgentImage and DNSImage are IMG, AGENT_IMG and DNS_IMG.
	ManagerImage, AgentImage, DNSImage string
	// AgentAPIServer is the API server's host:port for the agent (SetAgentAPIServer); empty
	// leaves the agent on the `kubernetes` Service, which needs kube-proxy beside it.
	AgentAPIServer string
}

// Member returns every object of dist/install.yaml: the CRDs a member serves (mcs-api's, then
// fleetslice's from config/crd), then config/default's objects, with the images substituted.
func Member(o Options) ([]*unstructured.Unstructured, error) {
	built, err := kustomize(o, "config/default")
	if err != nil {
		return nil, err
	}
	objs, err := Decode(mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD)
	if err != nil {
		return nil, fmt.Errorf("mcs-api CRDs: %w", err)
	}
	kustomized, err := Decode(built)
	if err != nil {
		return nil, err
	}
	objs = append(objs, kustomized...)
	if err := setImage(objs, "Deployment", ManagerContainer, o.ManagerImage); err != nil {
		return nil, err
	}
	if err := setImage(objs, "DaemonSet", AgentContainer, o.AgentImage); err != nil {
		return nil, err
	}
	if err := setImage(objs, "Deployment", DNSContainer, o.DNSImage); err != nil {
		return nil, err
	}
	if o.AgentAPIServer != "" {
		if err := SetAgentAPIServer(objs, o.AgentAPIServer); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// Broker returns every object of dist/broker.yaml: the ServiceExportRecord CRD members write, and
// the ClusterSet's namespace, member Role and admission policies (config/broker/broker.yaml).
func Broker(o Options) ([]*unstructured.Unstructured, error) {
	namespaced, err := os.ReadFile(filepath.Join(o.Root, "config/broker/broker.yaml"))
	if err != nil {
		return nil, err
	}
	return Decode(fleetslicecrd.ServiceExportRecordCRD, namespaced)
}

func kustomize(o Options, dir string) ([]byte, error) {
	cmd := exec.Command(o.Kustomize, "build", filepath.Join(o.Root, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s build %s: %v: %s", o.Kustomize, dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Decode splits YAML streams into objects, skipping empty documents.
func Decode(streams ...[]byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, stream := range streams {
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, err
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}

// PullPolicy is every container's imagePullPolicy: references name a release (and, once pushed,
// a digest), never a moving tag, so a node's copy is always current.
const PullPolicy = "IfNotPresent"

// setImage sets the image, and PullPolicy, of the container named container in the one object of
// kind.
func setImage(objs []*unstructured.Unstructured, kind, container, image string) error {
	found := 0
	for _, obj := range objs {
		if obj.GetKind() != kind {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return err
		}
		for i, c := range containers {
			cm, ok := c.(map[string]any)
			if ok && cm["name"] == container {
				cm["image"] = image
				cm["imagePullPolicy"] = PullPolicy
				containers[i] = cm
				found++
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return err
		}
	}
	if found != 1 {
		return fmt.Errorf("found %d %s containers named %q, want 1", found, kind, container)
	}
	return nil
}

// Encode writes objects as one YAML stream under a comment header.
func Encode(header string, objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		b.WriteString("# " + line + "\n")
	}
	for _, obj := range objs {
		out, err := sigyaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.Bytes(), nil
}

const memberHeader = `fleetslice for one member cluster: CRDs, namespace, RBAC, the manager and the node agent.
Generated by make build-installer; do not edit. Apply with: kubectl apply --server-side -f install.yaml
Join a ClusterSet afterwards with kubectl fleetslice join (docs/install.md).`

const crdsHeader = `The CRDs of dist/install.yaml alone, for Helm users: Helm installs the chart's crds/ once and never
upgrades them, so apply this first on every upgrade. Generated by make build-installer; do not edit.
Apply with: kubectl apply --server-side --force-conflicts -f crds.yaml`

const brokerHeader = `A ClusterSet's broker: the ServiceExportRecord CRD, the ClusterSet's namespace, the Role every
member is bound to and the admission policies that keep members to their own records.
Generated by make build-installer; do not edit. Members are added with kubectl fleetslice join.`

// Files returns every file make build-installer writes under dist/, by path; appVersion is the
// images' tag, the chart's appVersion.
func Files(o Options, appVersion string) (map[string][]byte, error) {
	member, err := Member(o)
	if err != nil {
		return nil, err
	}
	broker, err := Broker(o)
	if err != nil {
		return nil, err
	}
	files, err := Chart(member, appVersion)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for path, content := range files {
		out["chart/"+path] = content
	}
	if out["install.yaml"], err = Encode(memberHeader, member); err != nil {
		return nil, err
	}
	var crds []*unstructured.Unstructured
	for _, obj := range member {
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj)
		}
	}
	if out["crds.yaml"], err = Encode(crdsHeader, crds); err != nil {
		return nil, err
	}
	if out["broker.yaml"], err = Encode(brokerHeader, broker); err != nil {
		return nil, err
	}
	return out, nil
}
