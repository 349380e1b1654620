package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Load is one closed-loop load: Workers clients, each with its own UDP socket, ask for a random
// name of Names (type A), wait for the answer and ask again, until Duration has passed or
// MaxQueries were sent. Every answer is checked against Want.
type Load struct {
	Address    string
	Names      []string
	Want       map[string]string
	Workers    int
	Duration   time.Duration
	MaxQueries int
	// Timeout is how long one query may wait for its answer before it counts as lost.
	Timeout time.Duration
	Seed    uint64
}

// LoadResult is what a Load measured.
type LoadResult struct {
	Elapsed time.Duration
	// Latencies of the correctly answered queries.
	Latencies []time.Duration
	// Sent counts queries; Wrong those answered with anything but the one wanted address, Lost
	// those that got no answer in time.
	Sent, Wrong, Lost int
	// FirstWrong describes the first wrong answer, for the report.
	FirstWrong string
}

// QPS is correctly answered queries per second.
func (r *LoadResult) QPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Run applies the load. It fails only when it could not open a socket; bad answers are counted.
func (l Load) Run(ctx context.Context) (*LoadResult, error) {
	if len(l.Names) == 0 || l.Workers < 1 {
		return nil, errors.New("a load needs names and at least one worker")
	}
	conns := make([]*dns.Conn, l.Workers)
	for i := range conns {
		c, err := dns.Dial("udp", l.Address)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, err
		}
		conns[i] = c
	}
	budget := &atomic.Int64{}
	budget.Store(int64(l.MaxQueries))
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()

	parts := make([]LoadResult, l.Workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns[i].Close()
			l.work(ctx, conns[i], rand.New(rand.NewPCG(l.Seed, uint64(i))), budget, &parts[i])
		}()
	}
	wg.Wait()
	total := &LoadResult{Elapsed: time.Since(start)}
	for i := range parts {
		total.add(&parts[i])
	}
	return total, nil
}

// add counts r's queries into into; the elapsed times are the caller's to combine.
func (into *LoadResult) add(r *LoadResult) {
	into.Latencies = append(into.Latencies, r.Latencies...)
	into.Sent += r.Sent
	into.Wrong += r.Wrong
	into.Lost += r.Lost
	if into.FirstWrong == "" {
		into.FirstWrong = r.FirstWrong
	}
}

func (l Load) work(ctx context.Context, conn *dns.Conn, rng *rand.Rand, budget *atomic.Int64, out *LoadResult) {
	id := uint16(rng.Uint32())
	for ctx.Err() == nil && budget.Add(-1) >= 0 {
		name := l.Names[rng.IntN(len(l.Names))]
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		id++
		q.Id = id
		out.Sent++
		sent := time.Now()
		m, err := exchange(conn, q, sent.Add(l.Timeout))
		took := time.Since(sent)
		if err != nil {
			out.Lost++
			continue
		}
		if problem := check(m, name, l.Want[name]); problem != "" {
			out.Wrong++
			if out.FirstWrong == "" {
				out.FirstWrong = problem
			}
			continue
		}
		out.Latencies = append(out.Latencies, took)
	}
}

// exchange sends q and reads until the reply with q's id arrives (a late reply to an earlier,
// lost query is skipped) or the deadline passes.
func exchange(conn *dns.Conn, q *dns.Msg, deadline time.Time) (*dns.Msg, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if err := conn.WriteMsg(q); err != nil {
		return nil, err
	}
	for {
		m, err := conn.ReadMsg()
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return nil, err
		}
		if err == nil && m.Id == q.Id {
			return m, nil
		}
		if err != nil && m == nil {
			return nil, err
		}
	}
}

// check says what is wrong with m as the answer to an A query for name, or "" when it is exactly
// the one record want.
func check(m *dns.Msg, name, want string) string {
	if m.Rcode != dns.RcodeSuccess {
		return fmt.Sprintf("%s: %s", name, dns.RcodeToString[m.Rcode])
	}
	var got []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok && dns.CanonicalName(a.Hdr.Name) == dns.CanonicalName(name) {
			got = append(got, a.A.String())
		}
	}
	if !slices.Equal(got, []string{want}) || len(m.Answer) != 1 {
		return fmt.Sprintf("%s: answered %v, want [%s]", name, got, want)
	}
	return ""
}
