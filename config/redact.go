package config

import "github.com/visiond/visiond/internal/redact"

// Redact returns rawURL with its password hidden, as redact.URL does.
func Redact(rawURL string) string { return redact.URL(rawURL) }
