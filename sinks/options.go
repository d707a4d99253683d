package sinks

import "time"

// Defaults of the settings of a Publisher, its stream and the health event. config's
// defaults are these; a Publisher field left at zero takes the one its comment names.
const (
	// DefaultOutboxBytes bounds the events held in memory while they wait to be sent or
	// acknowledged: Publisher.OutboxBytes.
	DefaultOutboxBytes = 64 << 20
	// DefaultStreamMaxAge is how long the site's stream keeps events by default. A
	// StreamConfig's MaxAge of 0 means no age limit, so this default is config's
	// (nats.stream.max_age), not StreamConfig's.
	DefaultStreamMaxAge = 7 * 24 * time.Hour
	// DefaultStreamMaxBytes bounds the site's stream: StreamConfig.MaxBytes.
	DefaultStreamMaxBytes = 1 << 30
	// DefaultDuplicateWindow is how long the server remembers event ids to drop a retried
	// event it already holds: StreamConfig.Duplicates.
	DefaultDuplicateWindow = 2 * time.Minute
	// DefaultHealthInterval is the period of the HealthEvent (nats.health_interval).
	DefaultHealthInterval = 10 * time.Second

	defaultWindow     = 512              // Publisher.Window
	defaultAckTimeout = 5 * time.Second  // Publisher.AckTimeout
	defaultStoreCheck = 10 * time.Second // Publisher.StoreCheck
)

// Auth holds NATS credentials: user and password, or a token, or an nkey seed file, or a
// credentials (JWT) file; at most one of these. The zero value is none. Log none of it.
type Auth struct {
	// User and Password authenticate with a user name and its password. Default: none.
	User     string
	Password string
	// Token authenticates with a bearer token. Default: none.
	Token string
	// NKeySeedFile is a file holding an nkey user seed (a line starting with SU), for
	// clients and leaf links. Default: none.
	NKeySeedFile string
	// CredentialsFile is a NATS credentials file (a user JWT and its nkey seed), for
	// clients and leaf links. Default: none.
	CredentialsFile string
}

// TLS names PEM files. The zero value is no TLS.
type TLS struct {
	// CAFile holds the certificates that sign the peer's: a client verifies servers with
	// them instead of the system's roots; a server requires clients to present a
	// certificate they sign. Default: none.
	CAFile string
	// CertFile and KeyFile are this side's certificate and its key, which go together:
	// required for a server, optional for a client. Default: none.
	CertFile string
	KeyFile  string
}

// Leaf joins the embedded server to a hub as a leaf node: events published on the box flow to
// the hub while the link is up. The zero value is no hub.
type Leaf struct {
	// URL lists the hub's leaf node URLs, comma-separated, each nats-leaf://, nats:// or
	// tls://. Default "": no hub.
	URL string
	// Auth is what the box presents to the hub. Default: none.
	Auth Auth
	// TLS holds the CA that signs the hub's certificate and an optional client
	// certificate. Default: none.
	TLS TLS
}

// StreamConfig is the JetStream stream that holds the site's events.
type StreamConfig struct {
	// Name is the stream's name. Required with JetStream.
	Name string
	// MaxAge removes events older than this; 0 keeps them until MaxBytes (config's
	// default is DefaultStreamMaxAge).
	MaxAge time.Duration
	// MaxBytes bounds the stream: when full, the oldest events go first and a gap event
	// says how many. Default DefaultStreamMaxBytes (1 GiB).
	MaxBytes int64
	// Duplicates is how long the server remembers event ids, to drop a retried event it
	// already holds. Default DefaultDuplicateWindow (2 min).
	Duplicates time.Duration
}
