package mcsbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// busySampler reads how busy the whole machine's CPUs were, second by second, while a phase
// runs: a phase whose seconds are all near 100% is bound by CPU, and one with idle seconds
// waits on something else (a client's rate limit, too few workers, a watch).
type busySampler struct {
	stop    context.CancelFunc
	done    sync.WaitGroup
	mu      sync.Mutex
	percent []int
}

// cpuTicks returns the machine's busy and total CPU ticks so far (/proc/stat's first line).
func cpuTicks() (busy, total int64, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, f := range fields[1:] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat field %q: %w", f, err)
		}
		total += n
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return busy, total, nil
}

// sampleBusy starts sampling every second until stop.
func sampleBusy(ctx context.Context) *busySampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &busySampler{stop: cancel}
	s.done.Go(func() {
		busy, total, err := cpuTicks()
		if err != nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			b, t, err := cpuTicks()
			if err != nil || t == total {
				continue
			}
			s.mu.Lock()
			s.percent = append(s.percent, int(100*(b-busy)/(t-total)))
			s.mu.Unlock()
			busy, total = b, t
		}
	})
	return s
}

// finish stops sampling and summarises the seconds: the mean and each second's busy percent.
func (s *busySampler) finish() string {
	s.stop()
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.percent) == 0 {
		return "no sample"
	}
	sum := 0
	each := make([]string, len(s.percent))
	for i, p := range s.percent {
		sum += p
		each[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("%d%% on average, by second: %s", sum/len(s.percent), strings.Join(each, " "))
}
