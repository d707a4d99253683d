package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/sinks"
)

const clipUsage = `usage: visiond clip ls|get [flags]

  ls [-camera ID] [-json] [-limit N]   list the stored clips, newest first
  get NAME [-o FILE]                   write the clip NAME (<camera>/c<start ms>.mp4) to FILE
                                       (default: the name's base, here; "-": stdout)

Both read the site's clip store (<prefix>-<site>-clips) on -nats: the box's server, or a
hub's with -domain set to the box's JetStream domain. "visiond clip ls -h" lists the flags.
`

// clipNamePattern is what sinks.ClipName makes.
var clipNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}/c[0-9]+\.mp4$`)

// clipCmd lists and fetches the clips of a site's clip store (sinks.Clips).
func clipCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, clipUsage)
		return usageError{err: errors.New("no clip command"), printed: true}
	}
	switch args[0] {
	case "ls":
		return clipLsCmd(args[1:], stdout, stderr)
	case "get":
		return clipGetCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, clipUsage)
		return nil
	}
	fmt.Fprint(stderr, clipUsage)
	return usagef("unknown clip command %q", args[0])
}

// clipStore holds the flags that say where a clip store is.
type clipStore struct {
	url, creds, user, password, domain, prefix, site, bucket string
	timeout                                                  time.Duration
}

func (s *clipStore) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "nats", nats.DefaultURL, "NATS server `url`: the box's, or a hub's (with -domain)")
	fs.StringVar(&s.creds, "creds", "", "NATS credentials `file` (a user JWT and its nkey seed)")
	fs.StringVar(&s.user, "user", "", "NATS user `name` (with -password)")
	fs.StringVar(&s.password, "password", "", "NATS `password` (with -user; $NATS_PASSWORD when empty)")
	fs.StringVar(&s.domain, "domain", "", "JetStream `domain` of the box, to read its store through a hub's server (default: the server's own JetStream)")
	fs.StringVar(&s.prefix, "prefix", "visiond", "subject `prefix` of the site (the config's nats.prefix)")
	fs.StringVar(&s.site, "site", "", "`site` of the box (default: -domain's value, else \"local\")")
	fs.StringVar(&s.bucket, "bucket", "", "clip store `bucket` (default <prefix>-<site>-clips)")
	fs.DurationVar(&s.timeout, "timeout", 2*time.Minute, "give up after `duration`")
}

// bucketName is the store the flags name.
func (s *clipStore) bucketName() string {
	if s.bucket != "" {
		return s.bucket
	}
	site := s.site
	if site == "" {
		site = s.domain
	}
	if site == "" {
		site = "local"
	}
	return sinks.ClipBucket(s.prefix, site)
}

// where names the store for messages.
func (s *clipStore) where() string {
	w := fmt.Sprintf("clip store %s on %s", s.bucketName(), s.url)
	if s.domain != "" {
		w += " (JetStream domain " + s.domain + ")"
	}
	return w
}

// open connects and opens the store. The caller closes the connection.
func (s *clipStore) open(ctx context.Context) (*nats.Conn, jetstream.ObjectStore, error) {
	if s.creds != "" && s.user != "" {
		return nil, nil, usagef("-creds and -user: give one")
	}
	opts := []nats.Option{nats.Name("visiond-clip"), nats.Timeout(5 * time.Second)}
	switch {
	case s.creds != "":
		if _, err := os.Stat(s.creds); err != nil {
			return nil, nil, fmt.Errorf("-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(s.creds))
	case s.user != "":
		pw := s.password
		if pw == "" {
			pw = os.Getenv("NATS_PASSWORD")
		}
		opts = append(opts, nats.UserInfo(s.user, pw))
	}
	nc, err := nats.Connect(s.url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach NATS at %s: %w", s.url, err)
	}
	var js jetstream.JetStream
	if s.domain != "" {
		js, err = jetstream.NewWithDomain(nc, s.domain)
	} else {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	obs, err := js.ObjectStore(ctx, s.bucketName())
	if err != nil {
		nc.Close()
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			return nil, nil, fmt.Errorf("no %s: check -site/-prefix or -bucket, and that the daemon stores clips", s.where())
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return nil, nil, fmt.Errorf("%s: JetStream is not enabled there", s.where())
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout):
			return nil, nil, fmt.Errorf("%s: no JetStream answers (a wrong -domain, or the box's link is down): %w", s.where(), err)
		}
		return nil, nil, fmt.Errorf("%s: %w", s.where(), err)
	}
	return nc, obs, nil
}

// parseInterleaved parses args into fs, flags before and after the positional arguments
// (visiond clip get NAME -o FILE), and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func clipContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

func clipLsCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("clip ls", "", stderr)
	var store clipStore
	store.flags(fs)
	camera := fs.String("camera", "", "only the clips of camera `id`")
	asJSON := fs.Bool("json", false, "print a JSON array of the clips' infos (sinks.ClipInfo)")
	limit := fs.Int("limit", 0, "at most `n` clips, the newest (0: all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (the camera goes after -camera)", fs.Arg(0))
	}
	if *limit < 0 {
		return usagef("-limit %d: must be 0 (all) or more", *limit)
	}
	ctx, cancel := clipContext(store.timeout)
	defer cancel()
	nc, obs, err := store.open(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	clips, err := sinks.ListClips(ctx, obs, *camera, *limit)
	if err != nil {
		return fmt.Errorf("%s: list: %w", store.where(), err)
	}
	if *asJSON {
		if clips == nil {
			clips = []sinks.ClipInfo{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(clips)
	}
	if len(clips) == 0 {
		fmt.Fprintf(stderr, "visiond clip: no clips in the %s\n", store.where())
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTART\tDURATION\tSIZE\tOBJECTS")
	for _, c := range clips {
		fmt.Fprintf(tw, "%s\t%s\t%.1f s\t%s\t%s\n", c.Name, c.Start.Local().Format("2006-01-02 15:04:05.000"),
			c.DurationS, formatBytes(c.Bytes), formatObjects(c.Objects))
	}
	return tw.Flush()
}

// formatBytes writes n in KiB or MiB.
func formatBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// formatObjects lists a clip's objects as label#track.
func formatObjects(objs []sinks.ClipObject) string {
	if len(objs) == 0 {
		return "-"
	}
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = fmt.Sprintf("%s#%d", o.Label, o.TrackID)
	}
	return strings.Join(parts, ",")
}

func clipGetCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("clip get", " NAME", stderr)
	var store clipStore
	store.flags(fs)
	out := fs.String("o", "", "write the clip to `file` (\"-\": stdout; default: the name's base, in the current directory)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one clip name, got %d arguments", len(pos))
	}
	name := pos[0]
	if !clipNamePattern.MatchString(name) {
		return usagef("%q is not a clip name: want <camera>/c<start, unix ms>.mp4, as visiond clip ls lists them", name)
	}
	if *out == "" {
		*out = filepath.Base(name)
	}
	ctx, cancel := clipContext(store.timeout)
	defer cancel()
	nc, obs, err := store.open(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	r, err := obs.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("clip %s: not in the %s (removed by age or for room, or never stored: visiond clip ls lists them)", name, store.where())
	}
	if err != nil {
		return fmt.Errorf("clip %s: %w", name, err)
	}
	defer r.Close()
	if *out == "-" {
		if _, err := io.Copy(stdout, r); err != nil {
			return fmt.Errorf("clip %s: %w", name, err)
		}
		return nil
	}
	// Through a temporary file, so a failed read leaves no partial clip under the name.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".visiond-clip-*")
	if err != nil {
		return fmt.Errorf("-o %s: %w", *out, err)
	}
	_ = tmp.Chmod(0o644)      // CreateTemp's 0600 is for secrets; a clip is the user's to share
	n, err := io.Copy(tmp, r) // the reader checks the clip's digest at its end
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("clip %s: %w", name, err)
	}
	fmt.Fprintf(stderr, "visiond clip: wrote %s (%s)\n", *out, formatBytes(n))
	return nil
}
