package agentbench

// Dump is the dump of knftables' fake behind t, so that a Syncer over timedNFT reads its table
// back for a full sync as dataplane.NewDryRun's does (the kernel backend uses NewKernelNft,
// which reads the kernel over netlink). Over anything else there is none, and a Syncer made
// with dataplane.New would rebuild its table.
func (t *timedNFT) Dump() string {
	if d, ok := t.Interface.(interface{ Dump() string }); ok {
		return d.Dump()
	}
	return ""
}
