package sinks

import (
	"embed"
	"io/fs"
	"strings"
)

// schemaFiles are the JSON Schemas (draft 2020-12) of the events, one file per event kind,
// sharing common.json; docs/events.md explains them.
//
//go:embed schema/*.json
var schemaFiles embed.FS

// Schemas returns the event schemas: common.json and one file per event kind.
func Schemas() fs.FS {
	sub, err := fs.Sub(schemaFiles, "schema")
	if err != nil {
		panic(err) // the folder is embedded
	}
	return sub
}

// SchemaFile names the schema of the events on subject (detections.json, objects.json,
// zones.json, lines.json, status.json, health.json, gaps.json or config.json), or "" for a
// subject visiond does not publish on.
func SchemaFile(subject string) string {
	last := subject[strings.LastIndexByte(subject, '.')+1:]
	switch last {
	case "detections", "objects", "zones", "lines", "status", "health", "gaps", "config":
		return last + ".json"
	}
	return ""
}
