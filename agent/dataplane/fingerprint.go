package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
)

// fingerprint digests everything rendering depends on, so an unchanged
// fingerprint means the Service's objects in the kernel are already right
// and need not even be rendered again.
func fingerprint(svc *Service) [32]byte {
	size := 64 + len(svc.Namespace) + len(svc.Name) + 17*len(svc.ClusterIPs)
	for _, p := range svc.Ports {
		size += 32 + len(p.Name) + 20*(len(p.Endpoints)+len(p.ExternalEndpoints))
	}
	buf := make([]byte, 0, size)
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	num := func(n uint64) { buf = binary.AppendUvarint(buf, n) }
	endpoints := func(eps []Endpoint) {
		num(uint64(len(eps)))
		for _, ep := range eps {
			buf = append(buf, ep.Addr.Addr().AsSlice()...)
			num(uint64(ep.Addr.Port()))
			if ep.Local {
				num(1)
			} else {
				num(0)
			}
			num(uint64(max(ep.Weight, 1)))
		}
	}
	str(svc.Namespace)
	str(svc.Name)
	num(uint64(svc.AffinityTimeout))
	num(uint64(len(svc.ClusterIPs)))
	for _, ip := range svc.ClusterIPs {
		buf = append(buf, ip.AsSlice()...)
	}
	num(uint64(len(svc.Ports)))
	for _, p := range svc.Ports {
		str(p.Name)
		str(string(p.Protocol))
		num(uint64(p.Port))
		num(uint64(p.NodePort))
		if p.ExternalLocal {
			num(1)
		} else {
			num(0)
		}
		endpoints(p.Endpoints)
		endpoints(p.ExternalEndpoints)
	}
	return sha256.Sum256(buf)
}

// rawHasher digests a Service exactly as the caller passed it, in its
// order, with no validation and no allocation. When the digest matches the
// one recorded at the last write, the Service is unchanged and the sync
// skips even normalizing it, which keeps a sync of one change among
// thousands of Services cheap. A collision could only hide a change until
// the next full resync.
type rawHasher struct {
	h   maphash.Hash
	num [8]byte
}

func (r *rawHasher) number(n uint64) {
	binary.LittleEndian.PutUint64(r.num[:], n)
	r.h.Write(r.num[:])
}

func (r *rawHasher) text(s string) {
	r.number(uint64(len(s)))
	r.h.WriteString(s)
}

func (r *rawHasher) endpoints(eps []Endpoint) {
	r.number(uint64(len(eps)))
	for _, ep := range eps {
		a := ep.Addr.Addr().As16()
		r.h.Write(a[:])
		port := uint64(max(ep.Weight, 1))<<17 | uint64(ep.Addr.Port())<<1
		if ep.Local {
			port |= 1
		}
		r.number(port)
	}
}

func (r *rawHasher) digest(svc *Service) uint64 {
	r.h.Reset()
	r.text(svc.Namespace)
	r.text(svc.Name)
	r.number(uint64(svc.AffinityTimeout))
	r.number(uint64(len(svc.ClusterIPs)))
	for _, ip := range svc.ClusterIPs {
		a := ip.As16()
		r.h.Write(a[:])
		r.h.WriteByte(byte(ip.BitLen())) // tells 0.0.0.0 from ::ffff:0.0.0.0 and from an invalid address
	}
	r.number(uint64(len(svc.Ports)))
	for i := range svc.Ports {
		p := &svc.Ports[i]
		r.text(p.Name)
		r.text(string(p.Protocol))
		r.number(uint64(p.Port)<<17 | uint64(p.NodePort)<<1 | boolBit(p.ExternalLocal))
		r.endpoints(p.Endpoints)
		r.endpoints(p.ExternalEndpoints)
	}
	return r.h.Sum64()
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
