package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-logr/logr"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// StdoutLog is the --dry-run-output value that sends the ruleset to the log.
const StdoutLog = "-"

// RulesetWriter returns an OnSync callback that writes the rulesets of
// dryRuns, one after the other, to dest after each successful sync that
// changed them: to the file dest, replaced atomically so a reader never sees
// half a ruleset, or to log when dest is "-". Write errors are logged, not
// fatal: the dry run itself goes on.
func RulesetWriter(dest string, log logr.Logger, dryRuns ...*dataplane.DryRun) func(Report) {
	var (
		mu   sync.Mutex
		last string
		have bool
	)
	return func(r Report) {
		if r.Err != nil {
			return
		}
		var b strings.Builder
		for _, d := range dryRuns {
			b.WriteString(d.Ruleset())
		}
		text := b.String()
		mu.Lock()
		defer mu.Unlock()
		if have && text == last {
			return
		}
		if dest == StdoutLog {
			log.Info("dry-run ruleset", "services", r.Programmed, "ruleset", text)
		} else if err := writeAtomically(dest, text); err != nil {
			log.Error(err, "cannot write the dry-run ruleset", "path", dest)
			return
		}
		last, have = text, true
	}
}

func writeAtomically(path, text string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.WriteString(text)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(name)
		return fmt.Errorf("writing %s: %w", name, errors.Join(werr, cerr))
	}
	// CreateTemp makes the file private; a ruleset is no secret and other
	// tools (fleetslice run) read it.
	if err := os.Chmod(name, 0o644); err != nil {
		_ = os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return err
	}
	return nil
}
