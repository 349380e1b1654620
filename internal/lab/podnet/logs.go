package podnet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// followPoll is how often a followed log is checked for more output.
const followPoll = 200 * time.Millisecond

// writeLogs writes a container's log to w: all of it, or its last tailLines lines, then, when
// following, what is appended until ctx ends.
func writeLogs(ctx context.Context, w io.Writer, f *os.File, tailLines string, follow bool) error {
	all, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if tailLines != "" {
		n, err := strconv.Atoi(tailLines)
		if err != nil || n < 0 {
			return fmt.Errorf("tailLines %q is not a whole number", tailLines)
		}
		all = lastLines(all, n)
	}
	if _, err := w.Write(all); err != nil || !follow {
		return nil
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			continue
		}
		if err != nil && err != io.EOF {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// lastLines keeps the last n lines of b (a final line without a newline counts).
func lastLines(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		if i == n-1 {
			return b[j+1:]
		}
		end = j
	}
	return b
}
