package dataplane

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// desiredService is a validated Service ready to render, or one whose
// input is identical to what was last written (reused).
type desiredService struct {
	key         string
	raw         uint64
	svc         Service // normalized; zero when reused
	fingerprint [32]byte
	claims      []claim
	reused      *serviceRecord
}

// prepared is a sync's input once checked: the Services to (re)write, how many are kept as
// they were, and those left out.
type prepared struct {
	desired   []desiredService
	kept      int
	rejected  []Rejection
	contended bool
}

// scratch is what a sync marks while it reads its input, kept outside state so that a sync
// that fails changes nothing a later one relies on: a mark is the number of the sync that
// made it, and every sync has a new number.
type scratch struct {
	gen    uint64
	marks  []uint64 // by record slot: the last sync whose input held the Service
	keyBuf []byte
	hasher rawHasher
}

// begin starts a sync's marks over records numbered below slots.
func (sc *scratch) begin(slots int) {
	sc.gen++
	if len(sc.marks) < slots {
		sc.marks = append(sc.marks, make([]uint64, slots-len(sc.marks))...)
	}
}

func (sc *scratch) seen(rec *serviceRecord) bool { return sc.marks[rec.slot] == sc.gen }
func (sc *scratch) see(rec *serviceRecord)       { sc.marks[rec.slot] = sc.gen }
func (sc *scratch) unsee(rec *serviceRecord)     { sc.marks[rec.slot] = 0 }

// slots numbers the written records densely, reusing the numbers of removed ones, so that a
// sync's marks are a slice indexed by number rather than a map.
type slots struct {
	next int
	free []int
}

func (sl *slots) take() int {
	if n := len(sl.free); n > 0 {
		slot := sl.free[n-1]
		sl.free = sl.free[:n-1]
		return slot
	}
	sl.next++
	return sl.next - 1
}

func (sl *slots) give(slot int) { sl.free = append(sl.free, slot) }

// unseen lists the written Services that this sync's input no longer holds.
func (s *Syncer) unseen() []string {
	var out []string
	for key, rec := range s.state.written {
		if !s.scratch.seen(rec) {
			out = append(out, key)
		}
	}
	return out
}

// claim identifies a packet match two Services must not share.
type claim struct {
	ip       netip.Addr // invalid for NodePorts
	protocol Protocol
	port     uint16
}

// prepare validates and normalizes services, in a stable order. Of two
// Services claiming the same cluster IP and port or the same NodePort, the
// first by namespace/name wins and the other is rejected until the conflict
// goes away.
//
// A Service identical to what was last written is not returned but counted
// (kept) and marked as seen by this sync, so that the work done for
// each unchanged Service is one digest and one map lookup, without
// allocation: at 50,000 Services that scan is what an incremental sync costs
// besides the change itself.
func (s *Syncer) prepare(services []Service, full bool) prepared {
	sc, st := &s.scratch, &s.state
	sc.begin(st.slots.next)
	var out prepared
	var byKey map[string]bool // keys of the Services returned, made on the first
	for i := range services {
		svc := &services[i]
		sc.keyBuf = append(append(append(sc.keyBuf[:0], svc.Namespace...), '/'), svc.Name...)
		raw := sc.hasher.digest(svc)
		rec := st.written[string(sc.keyBuf)]
		if rec != nil && !full && rec.raw == raw && !sc.seen(rec) && !byKey[string(sc.keyBuf)] {
			sc.see(rec)
			out.kept++
			continue
		}
		key := string(sc.keyBuf)
		d, ok, err := s.desire(key, raw, svc, rec)
		if err != nil {
			out.rejected = append(out.rejected, Rejection{key, err.Error()})
			continue
		}
		if !ok {
			continue
		}
		if byKey[key] || (rec != nil && sc.seen(rec)) {
			out.rejected = append(out.rejected, Rejection{key, "duplicate service " + key})
			continue
		}
		if byKey == nil {
			byKey = map[string]bool{}
		}
		byKey[key] = true
		out.desired = append(out.desired, d)
	}
	if out.contended = s.contested(out.desired); out.contended {
		out.desired, out.kept, out.rejected = s.resolveContest(out.desired, out.rejected)
	}
	for i := range out.desired {
		if rec := st.written[out.desired[i].key]; rec != nil {
			sc.see(rec)
		}
	}
	return out
}

// desire normalizes svc for this sync. A Service whose input is the one its record was written
// from (the same raw digest, which incremental syncs trust to skip it) shares the record's
// normalized form, claims and fingerprint instead, which nothing changes once written: a full
// sync of an unchanged table would otherwise hold every Service twice at its largest moment.
func (s *Syncer) desire(key string, raw uint64, svc *Service, rec *serviceRecord) (desiredService, bool, error) {
	if rec != nil && rec.raw == raw {
		return desiredService{key: key, raw: raw, svc: rec.svc, claims: rec.claims, fingerprint: rec.fingerprint}, true, nil
	}
	norm, ok, err := normalize(*svc, s.pl.fam)
	if err != nil || !ok {
		return desiredService{}, ok, err
	}
	return desiredService{key: key, raw: raw, svc: norm, claims: claimsOf(&norm), fingerprint: fingerprint(&norm)}, true, nil
}

// contested reports whether a Service to be (re)written claims what another
// Service of this sync claims: another one to be written, or a kept one (its
// claims are those recorded).
func (s *Syncer) contested(desired []desiredService) bool {
	return s.state.clash(desired, func(owner string) bool {
		rec := s.state.written[owner]
		return rec != nil && s.scratch.seen(rec)
	})
}

// clash reports whether two of desired claim the same thing, or one claims what a written
// Service that stays (per stays) claims; a written Service that is itself in desired is judged by
// its new claims.
func (st *state) clash(desired []desiredService, stays func(owner string) bool) bool {
	local := map[claim]string{}
	for i := range desired {
		for _, c := range desired[i].claims {
			if owner, taken := local[c]; taken && owner != desired[i].key {
				return true
			}
			local[c] = desired[i].key
			if owner, taken := st.claimOwners[c]; taken && owner != desired[i].key && stays(owner) {
				return true
			}
		}
	}
	return false
}

// resolveContest settles claims over every Service of the sync, kept ones
// included, in namespace/name order, so that the winner is the same whatever
// order the caller used. A kept Service that loses is unmarked, so the sync
// removes it.
func (s *Syncer) resolveContest(desired []desiredService, rejected []Rejection) ([]desiredService, int, []Rejection) {
	all := desired
	for key, rec := range s.state.written {
		if s.scratch.seen(rec) {
			all = append(all, desiredService{key: key, raw: rec.raw, fingerprint: rec.fingerprint, claims: rec.claims, reused: rec})
		}
	}
	sortByKey(all)
	owners := map[claim]string{}
	var out []desiredService
	kept := 0
	for _, d := range all {
		if reason := claimAll(owners, &d); reason != "" {
			rejected = append(rejected, Rejection{d.key, reason})
			if d.reused != nil {
				s.scratch.unsee(d.reused)
			}
			continue
		}
		if d.reused != nil {
			kept++
		} else {
			out = append(out, d)
		}
	}
	return out, kept, rejected
}

func sortByKey(desired []desiredService) {
	slices.SortFunc(desired, func(a, b desiredService) int { return cmp.Compare(a.key, b.key) })
}

func claimsOf(svc *Service) []claim {
	mine := make([]claim, 0, len(svc.Ports)*(len(svc.ClusterIPs)+1))
	for _, p := range svc.Ports {
		for _, ip := range svc.ClusterIPs {
			mine = append(mine, claim{ip, p.Protocol, p.Port})
		}
		if p.NodePort != 0 {
			mine = append(mine, claim{netip.Addr{}, p.Protocol, p.NodePort})
		}
	}
	return mine
}

func claimAll(owners map[claim]string, d *desiredService) string {
	mine := d.claims
	for _, c := range mine {
		if owner, taken := owners[c]; taken && owner != d.key {
			what := fmt.Sprintf("%s %s/%d", c.ip, c.protocol, c.port)
			if !c.ip.IsValid() {
				what = fmt.Sprintf("node port %s/%d", c.protocol, c.port)
			}
			return what + " is already used by " + owner
		}
	}
	for _, c := range mine {
		owners[c] = d.key
	}
	return ""
}
