package datapathbench

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// request is one connection a client Pod opened: when it started, and the name of the Pod that
// answered ("" when none did).
type request struct {
	at     time.Time
	answer string
}

// requester opens one new TCP connection after another from inside a client Pod's network
// namespace to a Service address, as an application in that Pod would, and keeps what answered.
// Each connection is new, so every one is translated afresh by the client Node's rules.
type requester struct {
	netns, addr string
	// pause is the wait between two requests: the measurement's resolution, traded against the
	// CPU the answering Pods spend on a fork per request.
	pause time.Duration

	mu       sync.Mutex
	requests []request
}

func (r *requester) run(ctx context.Context) {
	for ctx.Err() == nil {
		at := time.Now()
		answer := ask(r.netns, r.addr)
		r.mu.Lock()
		r.requests = append(r.requests, request{at: at, answer: answer})
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(r.pause):
		}
	}
}

// since returns the requests started at or after t.
func (r *requester) since(t time.Time) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.requests)
	for i > 0 && !r.requests[i-1].at.Before(t) {
		i--
	}
	return append([]request(nil), r.requests[i:]...)
}

// ask opens one connection and returns the answer's text: the echo Pods write their name and close.
func ask(podNetns, addr string) string {
	conn, err := netns.DialIn(podNetns, "tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	body, _ := io.ReadAll(io.LimitReader(conn, 512))
	return strings.TrimSpace(string(body))
}

// firstAnswer is when the first request answered by pod started; ok is false when none was.
func firstAnswer(requests []request, pod string) (at time.Time, ok bool) {
	for _, r := range requests {
		if r.answer == pod {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// stoppedAt is when new connections stopped reaching pod after it went not ready at notReady:
// the start of the first request after the last one pod answered, and no earlier than the first
// request started at or after notReady. ok is false when no request started after pod's last
// answer, so that nothing shows it stopped.
func stoppedAt(requests []request, pod string, notReady time.Time) (at time.Time, ok bool) {
	last := -1
	for i, r := range requests {
		if r.answer == pod {
			last = i
		}
	}
	for _, r := range requests[last+1:] {
		if !r.at.Before(notReady) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// quietFor reports whether the requests started in the window before now number at least
// minRequests and none of them reached pod.
func quietFor(requests []request, pod string, now time.Time, window time.Duration, minRequests int) bool {
	n := 0
	for _, r := range requests {
		if r.at.Before(now.Add(-window)) {
			continue
		}
		if r.answer == pod {
			return false
		}
		n++
	}
	return n >= minRequests
}

// failed counts the requests nothing answered.
func failed(requests []request) int {
	n := 0
	for _, r := range requests {
		if r.answer == "" {
			n++
		}
	}
	return n
}
