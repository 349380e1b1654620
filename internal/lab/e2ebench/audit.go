package e2ebench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditWrite is one EndpointSlice write an API server's audit log recorded.
type auditWrite struct {
	at        time.Time
	namespace string
	verb      string // create, update, patch or delete, as apiserver_request_total names them
	conflict  bool
	userAgent string
}

// auditEvent holds the fields of an audit.k8s.io/v1 Event that say who wrote what, and when.
type auditEvent struct {
	Stage          string           `json:"stage"`
	Verb           string           `json:"verb"`
	UserAgent      string           `json:"userAgent"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
	ObjectRef      *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditVerbs maps the audit log's verbs to the names the API server's request counters use, so
// both ways of counting writes agree.
var auditVerbs = map[string]string{"create": "create", "update": "update", "patch": "patch", "delete": "delete", "deletecollection": "delete"}

// auditTail reads the EndpointSlice writes an API server appends to its audit log, from where it
// was opened on: one phase's writes, each with who made it.
type auditTail struct {
	path   string
	offset int64
}

// tailAudit starts reading the log at its current end; a log not yet created starts empty.
func tailAudit(path string) (*auditTail, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &auditTail{path: path}, nil
	}
	if err != nil {
		return nil, err
	}
	return &auditTail{path: path, offset: info.Size()}, nil
}

// next returns the writes logged since the last call; a line still being written is left for
// the next one.
func (t *auditTail) next() ([]auditWrite, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, err
	}
	var out []auditWrite
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		t.offset += int64(len(line))
		w, ok, err := parseAuditLine(bytes.TrimSpace(line))
		if err != nil {
			return out, fmt.Errorf("%s: %w", t.path, err)
		}
		if ok {
			out = append(out, w)
		}
	}
}

// parseAuditLine reads one event; ok is false for anything but a finished EndpointSlice write.
func parseAuditLine(line []byte) (w auditWrite, ok bool, err error) {
	if len(line) == 0 {
		return w, false, nil
	}
	var ev auditEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return w, false, fmt.Errorf("an audit event that is not JSON: %w", err)
	}
	verb, write := auditVerbs[ev.Verb]
	if ev.Stage != "ResponseComplete" || !write || ev.ObjectRef == nil || ev.ObjectRef.Resource != "endpointslices" {
		return w, false, nil
	}
	w = auditWrite{at: ev.StageTimestamp.Time, namespace: ev.ObjectRef.Namespace, verb: verb, userAgent: ev.UserAgent}
	w.conflict = ev.ResponseStatus != nil && ev.ResponseStatus.Code == 409
	return w, true, nil
}

// writesOf keeps the workload's writes whose user agent starts with prefix.
func writesOf(writes []auditWrite, prefix string) []auditWrite {
	var out []auditWrite
	for _, w := range writes {
		if w.namespace == workloadNamespace && strings.HasPrefix(w.userAgent, prefix) {
			out = append(out, w)
		}
	}
	return out
}

// unattributed lists the user agents of workload writes no side made: were there any, the split of
// writes between the sides could not be trusted.
func unattributed(writes []auditWrite, sides []Side) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range writes {
		mine := false
		for _, s := range sides {
			mine = mine || strings.HasPrefix(w.userAgent, s.userAgent)
		}
		if w.namespace == workloadNamespace && !mine && !seen[w.userAgent] {
			seen[w.userAgent] = true
			out = append(out, w.userAgent)
		}
	}
	return out
}

// countWrites counts writes by verb, and rejected ones (409 conflicts) once more as "conflict",
// as the API server's request counters do.
func countWrites(writes []auditWrite) map[string]int {
	out := map[string]int{}
	for _, w := range writes {
		out[w.verb]++
		if w.conflict {
			out["conflict"]++
		}
	}
	return out
}

// timeline is the cumulative count of writes every TimelineStep from start to end.
func timeline(writes []auditWrite, start time.Time, end time.Duration) []WritePoint {
	var out []WritePoint
	for at := time.Duration(0); ; at += TimelineStep {
		at = min(at, end)
		n := 0
		for _, w := range writes {
			if !w.at.After(start.Add(at)) {
				n++
			}
		}
		out = append(out, WritePoint{At: at, Writes: n})
		if at == end {
			return out
		}
	}
}
