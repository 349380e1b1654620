package image

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push sends the image index of an archive to the registry its reference names, with every
// platform's image, and returns the reference (in full form, as Pushed keys it) and the digest
// the registry now serves under it. The digest is read back from the registry rather than
// assumed, so what the installer pins is what a node will pull.
func Push(path string, opts ...remote.Option) (ref string, digest v1.Hash, err error) {
	a, err := OpenArchive(path)
	if err != nil {
		return "", v1.Hash{}, err
	}
	defer a.Close()
	tag, err := name.NewTag(a.Ref)
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("%s is tagged %q: %w", path, a.Ref, err)
	}
	if err := remote.WriteIndex(tag, a.Index, opts...); err != nil {
		return "", v1.Hash{}, fmt.Errorf("pushing %s to %s: %w", path, tag, err)
	}
	want, err := a.Index.Digest()
	if err != nil {
		return "", v1.Hash{}, err
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("reading back %s: %w", tag, err)
	}
	if desc.Digest != want {
		return "", v1.Hash{}, fmt.Errorf("%s serves %s after the push of %s", tag, desc.Digest, want)
	}
	return tag.Name(), want, nil
}
