package dataplane

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"

	"github.com/google/nftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// elementDigest is the digest of e as the kernel will hold it: the sum of its kernel elements'
// digests under the set's type, as the last accepted batches defined it.
func (b *netlinkBackend) elementDigest(e *ruleset.Element) (elemDigest, error) {
	d := b.sets[e.Set]
	if d == nil {
		return elemDigest{}, fmt.Errorf("no type for set %s", e.Set)
	}
	enc, err := d.AppendEncoded(b.digestScratch[:0], e, false)
	if err != nil {
		return elemDigest{}, fmt.Errorf("set %s: %w", e.Set, err)
	}
	b.digestScratch = enc
	return b.encodedDigest(enc), nil
}

// encodedDigest is the digest of an element encoded as the kernel elements enc.
func (b *netlinkBackend) encodedDigest(enc []nftables.SetElement) elemDigest {
	var out elemDigest
	for i := range enc {
		out.sum += b.kernelElementDigest(&enc[i])
		out.pieces++
	}
	return out
}

// kernelElementDigest hashes what decides packets of one kernel element: its key, key end,
// data or verdict, and whether it ends an interval. A set's digest is the sum of its elements'
// (a multiset hash: order does not matter, and the model updates it per element); with a
// per-process seed, two different sets of elements sum alike with a chance of about 2^-64.
func (b *netlinkBackend) kernelElementDigest(e *nftables.SetElement) uint64 {
	var h maphash.Hash
	h.SetSeed(b.seed)
	field := func(p []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	field(e.Key)
	field(e.KeyEnd)
	field(e.Val)
	switch {
	case e.VerdictData != nil:
		h.WriteByte(1)
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], uint64(e.VerdictData.Kind))
		h.Write(k[:])
		h.WriteString(e.VerdictData.Chain)
	default:
		h.WriteByte(0)
	}
	if e.IntervalEnd {
		h.WriteByte(1)
	} else {
		h.WriteByte(0)
	}
	return h.Sum64()
}
