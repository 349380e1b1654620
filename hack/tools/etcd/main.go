// Command etcd is upstream etcd's server entry point, built from the Go module proxy because the
// machines fleetslice is built on cannot download release binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
