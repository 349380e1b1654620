package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Config is one `fleetslice bench` run.
type Config struct {
	// Parts run in this order.
	Parts []Part
	// Order names every known part in document order; it defaults to Parts' order.
	Order []string
	Quick bool
	// Output is the Markdown document to rewrite the run parts' sections of; empty writes none.
	Output string
	// FigureDir is where pictures go; it defaults to "benchmarks" next to Output, and without
	// Output no pictures are drawn unless it is set.
	FigureDir string
	// Stdout receives each part's Markdown as soon as the part finishes; nil discards it.
	Stdout io.Writer
	// Log receives progress; nil discards it.
	Log io.Writer
	// Invocation is the command line of this run, shown beside each part's own command.
	Invocation string
	// BinDir is handed to the parts as Env.BinDir.
	BinDir string
}

// Run runs the parts one after another. A part that fails is reported and skipped; the others
// still run and are written, and the error names every failed part.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if len(cfg.Parts) == 0 {
		return nil, errors.New("no benchmark parts to run")
	}
	stdout, log := cfg.Stdout, cfg.Log
	if stdout == nil {
		stdout = io.Discard
	}
	if log == nil {
		log = io.Discard
	}
	env := Env{Quick: cfg.Quick, Log: log, FigureDir: cfg.FigureDir, FigureLink: cfg.FigureDir, BinDir: cfg.BinDir}
	if cfg.Output != "" && env.FigureDir == "" {
		env.FigureDir = filepath.Join(filepath.Dir(cfg.Output), "benchmarks")
	}
	if cfg.Output != "" && env.FigureDir != "" {
		link, err := filepath.Rel(filepath.Dir(cfg.Output), env.FigureDir)
		if err != nil {
			return nil, fmt.Errorf("placing pictures relative to %s: %w", cfg.Output, err)
		}
		env.FigureLink = link
	}
	if env.FigureDir != "" {
		if err := os.MkdirAll(env.FigureDir, 0o755); err != nil {
			return nil, err
		}
	}

	var results []Result
	var errs []error
	for _, p := range cfg.Parts {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if p.Run == nil {
			errs = append(errs, fmt.Errorf("part %q has no Run function", p.Name))
			continue
		}
		res := Result{Part: p, Machine: DescribeMachine(), Quick: cfg.Quick, Invocation: cfg.Invocation,
			Command: "fleetslice bench " + p.Name, Started: time.Now()}
		if cfg.Quick {
			res.Command += " --quick"
		}
		fmt.Fprintf(log, "bench %s: starting\n", p.Name)
		report, err := p.Run(ctx, env)
		res.Elapsed = time.Since(res.Started)
		if err != nil {
			fmt.Fprintf(log, "bench %s: failed after %s: %v\n", p.Name, res.Elapsed.Round(time.Second), err)
			errs = append(errs, fmt.Errorf("part %s: %w", p.Name, err))
			continue
		}
		if report == nil {
			report = &Report{}
		}
		res.Report = report
		fmt.Fprintf(log, "bench %s: done in %s\n", p.Name, res.Elapsed.Round(time.Second))
		fmt.Fprintln(stdout, res.Markdown())
		results = append(results, res)
	}

	if cfg.Output != "" && len(results) > 0 {
		if err := writeDocument(cfg, results); err != nil {
			errs = append(errs, err)
		}
	}
	return results, errors.Join(errs...)
}

func writeDocument(cfg Config, results []Result) error {
	existing, err := os.ReadFile(cfg.Output)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	order := cfg.Order
	if len(order) == 0 {
		for _, p := range cfg.Parts {
			order = append(order, p.Name)
		}
	}
	fresh := map[string]string{}
	for i := range results {
		fresh[results[i].Part.Name] = results[i].Markdown()
	}
	doc := MergeDocument(string(existing), order, fresh)
	if err := os.MkdirAll(filepath.Dir(cfg.Output), 0o755); err != nil {
		return err
	}
	tmp := cfg.Output + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, cfg.Output)
}
