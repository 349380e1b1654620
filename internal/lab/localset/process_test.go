package localset

import (
	"strings"
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

func TestDescribeSaysHowTheProcessEndedAndShowsItsLog(t *testing.T) {
	cs := &ClusterSet{Workdir: t.TempDir()}
	p, err := cs.StartProcess("crasher", "/bin/sh", "-c", "echo first; echo 'cannot reach the broker'; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for exited, _ := p.Exited(); !exited; exited, _ = p.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("sh did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := p.Describe(1)
	if !strings.Contains(got, "crasher: exited (exit status 3)") || !strings.Contains(got, "cannot reach the broker") || strings.Contains(got, "first") {
		t.Fatalf("Describe(1) = %q: want the exit status and only the last log line", got)
	}
}
