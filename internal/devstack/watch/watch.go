// Package watch restarts the dev stack when its code changes: `webhookdev
// dev --watch`, what `make dev` runs. A supervisor polls the module's
// files' modification times (a few hundred files: a walk every half
// second costs nothing, needs no file-notification dependency and works
// the same on every system and file system, network and container mounts
// included), rebuilds the webhookdev binary when one changes, and
// replaces the running stack with the new one. A build that fails is
// printed and the running stack is left alone until the code compiles
// again.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultEvery is how often the files are polled.
const DefaultEvery = 500 * time.Millisecond

// Files says which files of a module make the binary: its .go files but
// tests, its .sql files (migrations and queries are embedded), go.mod and
// go.sum, and the Extra files (what else a start reads), skipping
// hidden folders (.git, .local), testdata and nested modules (tools/,
// bench/: they build nothing of the stack).
type Files struct {
	// Root is the module's folder.
	Root string
	// Extra are more files to watch, relative to Root.
	Extra []string
}

// stamp is what says a file changed: a save changes its time, or its size
// within the file system's time granularity.
type stamp struct {
	mod  time.Time
	size int64
}

// Snapshot is the watched files' stamps, by path relative to Root.
type Snapshot map[string]stamp

// Scan stamps the watched files now.
func (f Files) Scan() (Snapshot, error) {
	snap := Snapshot{}
	err := filepath.WalkDir(f.Root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed during the walk: the next scan sees it
			}
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == f.Root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" {
				return fs.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return fs.SkipDir
			}
			return nil
		}
		watched := (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) ||
			strings.HasSuffix(name, ".sql") || name == "go.mod" || name == "go.sum"
		if !watched {
			return nil
		}
		return f.add(snap, path)
	})
	if err != nil {
		return nil, fmt.Errorf("watch: scan %s: %w", f.Root, err)
	}
	for _, x := range f.Extra {
		if err := f.add(snap, filepath.Join(f.Root, x)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("watch: %w", err)
		}
	}
	return snap, nil
}

func (f Files) add(snap Snapshot, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	rel, err := filepath.Rel(f.Root, path)
	if err != nil {
		rel = path
	}
	snap[rel] = stamp{fi.ModTime(), fi.Size()}
	return nil
}

// Changed lists, sorted, the files added, removed or modified from a to b.
func Changed(a, b Snapshot) []string {
	var out []string
	for p, s := range b {
		if old, ok := a[p]; !ok || !old.mod.Equal(s.mod) || old.size != s.size {
			out = append(out, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Child is a running dev stack.
type Child interface {
	// Stop asks it to stop (Ctrl-C) and waits until it has.
	Stop() error
	// Done is closed when it has exited, by itself or by Stop.
	Done() <-chan struct{}
}

// Supervisor runs a Child and replaces it with a newly built one when the
// Files change.
type Supervisor struct {
	Files Files
	// Every is the polling interval; 0 means DefaultEvery.
	Every time.Duration
	// After waits between polls; nil is time.After. Tests step it.
	After func(time.Duration) <-chan time.Time
	// Build builds the binary; its error carries the compiler's output.
	Build func(ctx context.Context) error
	// Start starts the binary last built.
	Start func(ctx context.Context) (Child, error)
	// Out gets the supervisor's lines.
	Out io.Writer
}

// Run builds and starts the stack, then rebuilds and restarts it on every
// change until ctx is done, when it stops the stack and returns nil. A
// build that fails leaves the running stack (or none, at first) until the
// next change; a stack that exits by itself is restarted on the next
// change too.
func (s *Supervisor) Run(ctx context.Context) error {
	every := s.Every
	if every <= 0 {
		every = DefaultEvery
	}
	after := s.After
	if after == nil {
		after = time.After
	}
	last, err := s.Files.Scan()
	if err != nil {
		return err
	}
	var child Child
	defer func() {
		if child != nil {
			if err := child.Stop(); err != nil {
				fmt.Fprintf(s.Out, "watch: stopping the stack: %v\n", err)
			}
		}
	}()
	restart := func(why string) {
		fmt.Fprintf(s.Out, "watch: %s: building ...\n", why)
		start := time.Now()
		if err := s.Build(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			keep := "nothing runs until it compiles"
			if child != nil {
				keep = "the running stack stays until it compiles"
			}
			fmt.Fprintf(s.Out, "watch: the build failed (%s):\n%v\n", keep, err)
			return
		}
		if child != nil {
			fmt.Fprintf(s.Out, "watch: built in %s; restarting the stack\n", time.Since(start).Round(10*time.Millisecond))
			if err := child.Stop(); err != nil {
				fmt.Fprintf(s.Out, "watch: stopping the stack: %v\n", err)
			}
			child = nil
		}
		c, err := s.Start(ctx)
		if err != nil {
			fmt.Fprintf(s.Out, "watch: starting the stack: %v (it starts again on the next change)\n", err)
			return
		}
		child = c
	}
	restart("starting")
	for {
		var exited <-chan struct{}
		if child != nil {
			exited = child.Done()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-exited:
			child = nil
			fmt.Fprintln(s.Out, "watch: the stack exited; it starts again on the next change (Ctrl-C ends the watch)")
			continue
		case <-after(every):
		}
		now, err := s.Files.Scan()
		if err != nil {
			fmt.Fprintf(s.Out, "%v\n", err)
			continue
		}
		changed := Changed(last, now)
		if len(changed) == 0 {
			continue
		}
		// An editor's save, a git checkout or a generator writes several
		// files in a burst: build once it has settled, a poll later.
		for settled := false; !settled; {
			select {
			case <-ctx.Done():
				return nil
			case <-after(every):
			}
			next, err := s.Files.Scan()
			if err != nil {
				break
			}
			more := Changed(now, next)
			settled = len(more) == 0
			changed = Changed(last, next)
			now = next
		}
		last = now
		if len(changed) == 0 {
			continue // changed and changed back
		}
		restart(describe(changed))
	}
}

// describe names the changed files, a few of them.
func describe(paths []string) string {
	const shown = 3
	if len(paths) <= shown {
		return strings.Join(paths, ", ") + " changed"
	}
	return fmt.Sprintf("%s and %d more changed", strings.Join(paths[:shown], ", "), len(paths)-shown)
}
