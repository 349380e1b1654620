package datapathbench

import (
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// at builds a request log: one request per answer, a tick apart from t0.
func at(t0 time.Time, answers ...string) []request {
	out := make([]request, len(answers))
	for i, a := range answers {
		out[i] = request{at: t0.Add(time.Duration(i) * tick), answer: a}
	}
	return out
}

const tick = 10 * time.Millisecond

func TestFirstAnswer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		answers []string
		want    int // index of the request, -1 for none
	}{
		{"none", nil, -1},
		{"never the pod", []string{"base", "", "base"}, -1},
		{"first", []string{"p", "base"}, 0},
		{"after failures and others", []string{"", "base", "p", "p"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := firstAnswer(at(t0, tc.answers...), "p")
			if ok != (tc.want >= 0) || (ok && !got.Equal(t0.Add(time.Duration(tc.want)*tick))) {
				t.Errorf("firstAnswer = %v, %v; want request %d", got, ok, tc.want)
			}
		})
	}
}

func TestStoppedAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		answers  []string
		notReady int // index of the first request started at or after the not-ready write
		want     int // -1 for not ok
	}{
		{"stops at once", []string{"p", "base", "p", "base", "base"}, 3, 3},
		{"still reached after the write", []string{"p", "base", "p", "p", "base", "base"}, 2, 4},
		{"reached by the last request", []string{"p", "base", "p"}, 1, -1},
		{"never reached since before the write", []string{"base", "base", "base"}, 1, 1},
		{"failures count as not reaching it", []string{"p", "", "base"}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := stoppedAt(at(t0, tc.answers...), "p", t0.Add(time.Duration(tc.notReady)*tick))
			if ok != (tc.want >= 0) || (ok && !got.Equal(t0.Add(time.Duration(tc.want)*tick))) {
				t.Errorf("stoppedAt = %v, %v; want request %d", got, ok, tc.want)
			}
		})
	}
}

func TestQuietFor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		answers []string
		window  time.Duration
		min     int
		want    bool
	}{
		{"no requests", nil, time.Second, 1, false},
		{"enough requests, none reach it", []string{"base", "base", "", "base"}, time.Second, 3, true},
		{"too few requests in the window", []string{"base", "base"}, time.Second, 3, false},
		{"reached inside the window", []string{"base", "p", "base", "base"}, time.Second, 3, false},
		{"reached only before the window", []string{"p", "base", "base", "base"}, 25 * time.Millisecond, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests := at(t0, tc.answers...)
			now := t0.Add(time.Duration(len(tc.answers)-1) * tick)
			if got := quietFor(requests, "p", now, tc.window, tc.min); got != tc.want {
				t.Errorf("quietFor = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	if got := failed(at(time.Unix(0, 0), "", "p", "", "base")); got != 2 {
		t.Errorf("failed = %d, want 2", got)
	}
}

func TestRequesterSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &requester{requests: at(t0, "a", "b", "c")}
	if got := r.since(t0.Add(tick)); len(got) != 2 || got[0].answer != "b" {
		t.Errorf("since(t0+tick) = %v, want b and c", got)
	}
	if got := r.since(t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("since(later) = %v, want none", got)
	}
}

func TestPathChecks(t *testing.T) {
	s := setup{samples: 2, answerTimeout: time.Minute}
	good := pathFigures{Ready: []time.Duration{time.Second, 2 * time.Second}, Stopped: []time.Duration{time.Second, time.Second}}
	for _, tc := range []struct {
		name   string
		figs   pathFigures
		failed int
	}{
		{"all seen in time", good, 0},
		{"a ready Pod never answered", pathFigures{Ready: good.Ready[:1], Stopped: good.Stopped, MissingReady: 1}, 1},
		{"a not-ready Pod still reached", pathFigures{Ready: good.Ready, Stopped: good.Stopped[:1], MissingStopped: 1}, 1},
		{"slower than the SLO", pathFigures{Ready: []time.Duration{time.Second, 31 * time.Second}, Stopped: good.Stopped}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, c := range pathChecks(s, 10, "x", tc.figs) {
				if !c.Passed() {
					n++
				}
			}
			if n != tc.failed {
				t.Errorf("%d checks failed, want %d", n, tc.failed)
			}
		})
	}
}

func TestResolveRejectsBadSettings(t *testing.T) {
	for _, o := range []settings{
		{nodes: 2, services: []int{100, 10}},
		{nodes: 2, services: []int{MaxServices + 1}},
		{nodes: 0},
		{nodes: 2, samples: 201},
	} {
		if _, err := o.resolve(bench.Env{Quick: true}); err == nil {
			t.Errorf("resolve(%+v) accepted bad settings", o)
		}
	}
	if s, err := (&settings{nodes: 2}).resolve(bench.Env{Quick: true}); err != nil || s.samples != 3 || len(s.services) != 1 {
		t.Errorf("quick defaults = %+v, %v", s, err)
	}
}
