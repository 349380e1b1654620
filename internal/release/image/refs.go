package image

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/fleetslice/fleetslice/pkg/version"
)

// DefaultRegistry is where the project's release images are published.
const DefaultRegistry = "ghcr.io/fleetslice"

// DefaultPlatforms are what `make docker-build` builds every image for.
const DefaultPlatforms = "linux/amd64,linux/arm64"

// HostPlatform is the platform of the machine running this code, the one whose image it can run.
func HostPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// ParsePlatforms reads a comma-separated list of os/arch[/variant], as docker buildx's
// --platform takes it. Go must be able to cross-compile for each (only linux is accepted: the
// images run on Kubernetes nodes), and none may repeat.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, "/")
		if len(fields) < 2 || len(fields) > 3 || fields[0] == "" || fields[1] == "" {
			return nil, fmt.Errorf("platform %q: want os/arch or os/arch/variant", part)
		}
		if fields[0] != "linux" {
			return nil, fmt.Errorf("platform %q: the images run on Kubernetes nodes; only linux is built", part)
		}
		p := v1.Platform{OS: fields[0], Architecture: fields[1]}
		if len(fields) == 3 {
			p.Variant = fields[2]
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("platform %q is listed twice", part)
		}
		seen[p.String()] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return out, nil
}

// Refs are the references of the three images.
type Refs struct {
	Manager, Agent, DNS string
}

// ResolveRefs fills each empty reference of set with <registry>/<repository>:<tag>, where the
// repositories are manager, agent and dns, and an empty registry or tag means DefaultRegistry and
// version.Release: defaults name a release, never a moving tag. Every reference must be a tag
// (a digest is what a push produces, not what a build is named).
func ResolveRefs(registry, tag string, set Refs) (Refs, error) {
	if registry == "" {
		registry = DefaultRegistry
	}
	if tag == "" {
		tag = version.Release
	}
	registry = strings.TrimSuffix(registry, "/")
	fill := func(ref *string, repo string) error {
		if *ref == "" {
			*ref = registry + "/" + repo + ":" + tag
		}
		_, err := explicitTag(*ref)
		return err
	}
	for _, f := range []struct {
		ref  *string
		repo string
	}{{&set.Manager, "manager"}, {&set.Agent, "agent"}, {&set.DNS, "dns"}} {
		if err := fill(f.ref, f.repo); err != nil {
			return Refs{}, err
		}
	}
	return set, nil
}

// DigestsFile is the file, beside the image archives, where `make docker-push` records what it
// pushed and `make build-installer` reads the digests to pin.
const DigestsFile = "image-digests.yaml"

// Pushed maps an image reference (registry/repository:tag, in go-containerregistry's full form:
// "manager:v1" is "index.docker.io/library/manager:v1") to the digest of the index pushed under it.
type Pushed map[string]string

const digestsHeader = `# Written by make docker-push: the digest of each image index it pushed, by the reference it
# pushed it to. make build-installer pins the references it names that are listed here.
`

// ReadPushed reads a digests file; a missing file is an empty record (nothing pushed yet).
func ReadPushed(path string) (Pushed, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Pushed{}, nil
	}
	if err != nil {
		return nil, err
	}
	p := Pushed{}
	if err := sigyaml.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for ref, digest := range p {
		if _, err := v1.NewHash(digest); err != nil {
			return nil, fmt.Errorf("%s: digest of %s: %w", path, ref, err)
		}
	}
	return p, nil
}

// Write stores the record, one reference a line in sorted order.
func (p Pushed) Write(path string) error {
	refs := make([]string, 0, len(p))
	for ref := range p {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	var b strings.Builder
	b.WriteString(digestsHeader)
	for _, ref := range refs {
		fmt.Fprintf(&b, "%s: %s\n", ref, p[ref])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Pin returns ref with the digest pushed under it appended (registry/repository:tag@sha256:...),
// or ref itself when nothing was pushed under exactly that reference. Keeping the tag beside the
// digest keeps the installer readable; runtimes pull by the digest.
func (p Pushed) Pin(ref string) string {
	tag, err := explicitTag(ref)
	if err != nil {
		return ref // a digest already, or not a reference docker-push could have pushed
	}
	if d := p[tag.Name()]; d != "" {
		return ref + "@" + d
	}
	return ref
}

// explicitTag parses ref as repository:tag, with the tag written out: go-containerregistry would
// read "repo" as "repo:latest", a moving reference a build must not be named by.
func explicitTag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref)
	if err == nil && !strings.HasSuffix(ref, ":"+tag.TagStr()) {
		err = fmt.Errorf("no tag")
	}
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: %w (want [registry/]repository:tag)", ref, err)
	}
	return tag, nil
}
