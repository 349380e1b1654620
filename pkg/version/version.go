// Package version holds the release a fleetslice binary was built from. The image build and
// `make build` stamp it at link time with -ldflags "-X .../pkg/version.Version=...".
package version

// Version is the git description of the commit the binary was built from ("dev" when unstamped).
var Version = "dev"

// Release is the release this tree becomes: it tags the images `make docker-build` builds by
// default and versions the Helm chart, so a default install never names a moving `:latest`.
// Bump it when cutting a release.
const Release = "v0.1.0"
