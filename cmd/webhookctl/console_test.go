package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startConsole runs `webhookctl console args...` with the fixture's
// environment until the test ends, and returns the address it printed.
func (f *opsFixture) startConsole(args ...string) (url string, stop func() error) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	pr, pw := io.Pipe()
	cmd := newRootCmd()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"console", "--addr", "127.0.0.1:0"}, args...))
	env := f.env
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(withEnv(ctx, func(k string) string { return env[k] }))
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	rd := bufio.NewReader(pr)
	line, err := rd.ReadString('\n')
	var second string
	if err == nil {
		second, err = rd.ReadString('\n')
	}
	if err != nil {
		cancel()
		f.t.Fatalf("console printed no address: %v (%v)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	// The address with a one-time sign-in code, then the token's.
	m := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+/\?code=\S+)`).FindStringSubmatch(line)
	tm := regexp.MustCompile(`another browser: (http://127\.0\.0\.1:\d+/\?token=\S+)\)`).FindStringSubmatch(second)
	if m == nil || tm == nil {
		cancel()
		f.t.Fatalf("console printed %q, %q", line, second)
	}
	f.consoleTokenURL = tm[1]
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			f.t.Fatal("the console did not stop")
			return nil
		}
	}
	f.t.Cleanup(func() { _ = stop() })
	return m[1], stop
}

// TestConsoleServesUntilInterrupted: webhookctl console listens on
// loopback, prints the address with a random token, serves the pages with
// the command's database settings (the token's session first), refuses
// requests without it, and stops cleanly when interrupted. A configured
// token is used as given; a short one is refused.
func TestConsoleServesUntilInterrupted(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_console_1", "invoice.paid")
	addr, stop := f.startConsole("--actor", "bob")
	base := addr[:strings.Index(addr, "/?code=")]
	if resp, err := http.Get(base + "/events"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %v %v", resp, err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(addr)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %v, %v", addr, resp, err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + "/events?source=stripe")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "evt_console_1") || !strings.Contains(string(page), "acting as bob") {
		t.Errorf("events page does not list the event, acting as bob:\n%s", page)
	}
	if err := stop(); err != nil {
		t.Fatalf("the console stopped with %v", err)
	}

	f.env["WEBHOOKCTL_CONSOLE_TOKEN"] = "a-configured-token-of-length-0123456789"
	addr, _ = f.startConsole("--read-only")
	if !strings.HasSuffix(f.consoleTokenURL, "?token=a-configured-token-of-length-0123456789") {
		t.Errorf("a configured token: the console printed %s", f.consoleTokenURL)
	}
	if _, _, err := f.run("console", "--addr", "127.0.0.1:0", "--token", "short"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short token: %v", err)
	}
}

// TestConsoleReadOnlyAndWindow: --read-only serves an API that may only
// read, so the pages offer no action and say so; --window is a span as
// every command writes it (7d), and one longer than the API takes stops
// the command at start.
func TestConsoleReadOnlyAndWindow(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.insert("stripe", "evt_console_ro", "invoice.paid")
	addr, _ := f.startConsole("--read-only", "--window", "7d")
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`<span class="who">read-only</span>`, "Refused, last 7d"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
			t.Errorf("overview = %d, lacks %q:\n%s", resp.StatusCode, want, page)
		}
	}
	if strings.Contains(string(page), `method="post"`) {
		t.Errorf("a read-only console offers actions:\n%s", page)
	}
	if _, _, err := f.run("console", "--addr", "127.0.0.1:0", "--window", "100d"); err == nil || !strings.Contains(err.Error(), "window") {
		t.Errorf("--window 100d: %v, want the window refused", err)
	}
	if _, _, err := f.run("console", "--addr", "127.0.0.1:0", "--window", "soon"); err == nil {
		t.Error("--window soon: no error")
	}
}
