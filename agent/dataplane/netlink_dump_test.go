package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// elementList encodes an element list message's attributes as the kernel dumps them: a verdict
// map element with a comment, and an interval end.
func elementList(t testing.TB) []byte {
	t.Helper()
	marshal := func(attrs ...netlink.Attribute) []byte {
		b, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	code := make([]byte, 4)
	goto_ := int32(unix.NFT_GOTO)
	binary.BigEndian.PutUint32(code, uint32(goto_))
	flags := make([]byte, 4)
	binary.BigEndian.PutUint32(flags, unix.NFT_SET_ELEM_INTERVAL_END)
	verdictMapElem := marshal(
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_KEY | unix.NLA_F_NESTED, Data: marshal(netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: []byte{10, 0, 0, 1}})},
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_DATA | unix.NLA_F_NESTED, Data: marshal(netlink.Attribute{Type: unix.NFTA_DATA_VERDICT | unix.NLA_F_NESTED, Data: marshal(
			netlink.Attribute{Type: unix.NFTA_VERDICT_CODE, Data: code},
			netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: []byte("svc-web\x00")})})},
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_USERDATA, Data: userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, "shop/web:http")},
	)
	intervalEnd := marshal(
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_FLAGS, Data: flags},
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_KEY | unix.NLA_F_NESTED, Data: marshal(netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: []byte{10, 0, 1, 0}})},
	)
	return marshal(
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte("fleetslice\x00")},
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_LIST_ELEMENTS | unix.NLA_F_NESTED, Data: marshal(
			netlink.Attribute{Type: 1 | unix.NLA_F_NESTED, Data: verdictMapElem},
			netlink.Attribute{Type: 1 | unix.NLA_F_NESTED, Data: intervalEnd})},
	)
}

func TestDecodeElementListReadsWhatTheKernelDumps(t *testing.T) {
	var got []dumpedElement
	if err := decodeElementList(elementList(t), func(e *dumpedElement) { got = append(got, *e) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d elements, want 2", len(got))
	}
	e := got[0]
	if string(e.key) != "\x0a\x00\x00\x01" || !e.verdict || e.code != unix.NFT_GOTO || e.chain != "svc-web" || e.comment != "shop/web:http" || e.intervalEnd {
		t.Errorf("verdict map element decoded as %+v", e)
	}
	if e := got[1]; string(e.key) != "\x0a\x00\x01\x00" || !e.intervalEnd || e.verdict {
		t.Errorf("interval end decoded as %+v", e)
	}
}

// FuzzDecodeElementList: whatever the bytes, decoding returns an error or elements, never
// panics, and every element's key and value lie within the message.
func FuzzDecodeElementList(f *testing.F) {
	f.Add(elementList(f))
	f.Add([]byte{4, 0, 3, 0})
	f.Add([]byte{8, 0, 3, 0x80, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = decodeElementList(b, func(e *dumpedElement) {
			if len(e.key) > len(b) || len(e.val) > len(b) {
				t.Fatalf("an element's key or value is longer than the message: %+v", e)
			}
		})
	})
}
