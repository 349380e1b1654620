package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The kernel dumps a hash set's elements one message at a time and, for each message, walks
// the set from its start to skip what it already sent: reading a set of n elements costs it
// about n²/k element visits, k elements a message. It sizes those messages to the reader's
// receive buffer, up to 32 KiB; google/nftables reads through a page-sized buffer, about 60 of
// the endpoint maps' elements a message, which made reading 100,000 of them take 3 s of kernel
// time. dumpElements reads with a 64 KiB buffer: about 500 a message, 8 times fewer walks.

// dumpBuffer is what dumpElements reads with; the kernel fills messages of at most 32 KiB.
const dumpBuffer = 64 << 10

// dumpedElement is one element as the kernel lists it. key and val point into the read
// buffer: they hold only while the element is handed over (elementDumper.elements).
type dumpedElement struct {
	key, val    []byte
	intervalEnd bool
	verdict     bool
	code        int32 // NF_DROP, NFT_JUMP, NFT_GOTO... with verdict
	chain       string
	comment     string
}

// elementDumper lists the elements of the sets of one table over a netlink socket of its own.
type elementDumper struct {
	fd     int
	family byte
	seq    uint32
	buf    []byte
}

func newElementDumper(family byte) (*elementDumper, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &elementDumper{fd: fd, family: family, buf: make([]byte, dumpBuffer)}, nil
}

func (d *elementDumper) close() { unix.Close(d.fd) }

// elements hands each element of set name in the agent's table to each, as it is read: a
// full sync reads every element of the table, and keeps only their spellings.
func (d *elementDumper) elements(name string, each func(*dumpedElement)) error {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, TableName)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, name)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	d.seq++
	req := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+4+len(attrs))
	req = append(append(req, d.family, unix.NFNETLINK_V0, 0, 0), attrs...)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], uint16(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETSETELEM))
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], d.seq)
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	for {
		n, _, err := unix.Recvfrom(d.fd, d.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		done, err := d.messages(d.buf[:n], each)
		if err != nil || done {
			return err
		}
	}
}

// messages decodes the netlink messages of one read, handing each element to each; done at
// the dump's end.
func (d *elementDumper) messages(b []byte, each func(*dumpedElement)) (done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		size := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		seq := binary.NativeEndian.Uint32(b[8:])
		if size < unix.NLMSG_HDRLEN || size > len(b) {
			return false, fmt.Errorf("a netlink message of %d bytes in %d", size, len(b))
		}
		body := b[unix.NLMSG_HDRLEN:size]
		b = b[min((size+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1), len(b)):]
		switch {
		case seq != d.seq:
			continue // an answer to an earlier request
		case typ == unix.NLMSG_DONE:
			return true, nil
		case typ == unix.NLMSG_ERROR:
			if len(body) >= 4 {
				if errno := -int32(binary.NativeEndian.Uint32(body)); errno != 0 {
					return false, unix.Errno(errno)
				}
			}
			return true, nil
		}
		if len(body) < 4 {
			continue
		}
		if err := decodeElementList(body[4:], each); err != nil {
			return false, err
		}
	}
	return false, nil
}

// decodeElementList reads an element list message's attributes. It walks them in place: the
// attribute decoder allocates for every nested attribute, and a full sync reads a few per
// element of the table.
func decodeElementList(b []byte, each func(*dumpedElement)) error {
	return walkAttributes(b, func(typ uint16, list []byte) error {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			return nil
		}
		var e dumpedElement // one for the list: each gets it only while it is handed over
		return walkAttributes(list, func(_ uint16, elem []byte) error {
			e = dumpedElement{}
			if err := e.decode(elem); err != nil {
				return err
			}
			each(&e)
			return nil
		})
	})
}

// walkAttributes calls fn with the type (flags cleared) and payload of each netlink attribute
// in b.
func walkAttributes(b []byte, fn func(typ uint16, data []byte) error) error {
	for len(b) >= unix.SizeofNlAttr {
		size := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if size < unix.SizeofNlAttr || size > len(b) {
			return fmt.Errorf("a netlink attribute of %d bytes in %d", size, len(b))
		}
		if err := fn(typ, b[unix.SizeofNlAttr:size]); err != nil {
			return err
		}
		b = b[min((size+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1), len(b)):]
	}
	return nil
}

// dataValue is the value a NFTA_DATA attribute nests.
func dataValue(b []byte) (value []byte, err error) {
	err = walkAttributes(b, func(typ uint16, data []byte) error {
		if typ == unix.NFTA_DATA_VALUE {
			value = data
		}
		return nil
	})
	return value, err
}

func (e *dumpedElement) decode(b []byte) error {
	return walkAttributes(b, func(typ uint16, data []byte) error {
		var err error
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			e.key, err = dataValue(data)
		case unix.NFTA_SET_ELEM_DATA:
			err = e.decodeData(data)
		case unix.NFTA_SET_ELEM_FLAGS:
			if len(data) < 4 {
				return fmt.Errorf("element flags of %d bytes", len(data))
			}
			e.intervalEnd = binary.BigEndian.Uint32(data)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_USERDATA:
			e.comment = userComment(data)
		}
		return err
	})
}

func (e *dumpedElement) decodeData(b []byte) error {
	return walkAttributes(b, func(typ uint16, data []byte) error {
		switch typ {
		case unix.NFTA_DATA_VALUE:
			e.val = data
		case unix.NFTA_DATA_VERDICT:
			e.verdict = true
			return walkAttributes(data, func(typ uint16, v []byte) error {
				switch typ {
				case unix.NFTA_VERDICT_CODE:
					if len(v) < 4 {
						return fmt.Errorf("a verdict code of %d bytes", len(v))
					}
					e.code = int32(binary.BigEndian.Uint32(v))
				case unix.NFTA_VERDICT_CHAIN:
					e.chain = nulTerminated(v)
				}
				return nil
			})
		}
		return nil
	})
}

// nulTerminated is a netlink string attribute's text.
func nulTerminated(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// userComment is the comment in an element's user data (type, length, value records):
// google/nftables' reader slices past the end of a record whose length overruns the data.
func userComment(b []byte) string {
	for len(b) >= 2 {
		typ, size := userdata.Type(b[0]), int(b[1])
		if 2+size > len(b) {
			return ""
		}
		if typ == userdata.NFTNL_UDATA_SET_ELEM_COMMENT {
			return nulTerminated(b[2 : 2+size])
		}
		b = b[2+size:]
	}
	return ""
}
