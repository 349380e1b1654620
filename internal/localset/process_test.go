package localset

import (
	"testing"
	"time"
)

func TestProcessStopTwiceAndExited(t *testing.T) {
	cs := &ClusterSet{Workdir: t.TempDir()}
	p, err := cs.StartProcess("sleeper", "/bin/sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("sleep exited at once")
	}
	done := make(chan error, 2)
	go func() {
		done <- p.Stop(5 * time.Second)
		done <- p.Stop(5 * time.Second)
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a second Stop must return, not hang")
		}
	}
	if exited, _ := p.Exited(); !exited {
		t.Fatal("Exited must report a stopped process")
	}
}
