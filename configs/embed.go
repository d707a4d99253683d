// Package configs holds visiond's YAML configuration files, embedded so that
// the binary carries them.
package configs

import _ "embed"

// Default is the embedded default config, used when visiond runs without
// -config: a demo that watches the built-in sample camera.
//
//go:embed default.yaml
var Default []byte

// Example is the documented example config for a production box: every key
// with its meaning and default.
//
//go:embed visiond.yaml
var Example []byte
