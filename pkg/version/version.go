// Package version holds the release a fleetslice binary was built from. The image build and
// `make build` stamp it at link time with -ldflags "-X .../pkg/version.Version=...".
package version

// Version is the git description of the commit the binary was built from ("dev" when unstamped).
var Version = "dev"
