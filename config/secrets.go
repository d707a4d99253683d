package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Environment variables in string values.
//
// A string value (never a key, never a number, duration or boolean) may name
// environment variables as ${NAME}, NAME being letters, digits and '_' not
// starting with a digit; "$$" is one "$"; a "$" followed by anything else is
// kept as it is. An unset variable is an error naming it (a variable set to
// "" gives ""). Substitution happens on the parsed YAML value, so quoting is
// unaffected and a variable's value is never parsed as YAML.

// expandEnv substitutes the environment variables of s as described above.
// Its errors name the variable, never a value.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New(`"${" without its closing "}" (write "$$" for a "$")`)
			}
			name := s[i+2 : i+2+end]
			if !isEnvName(name) {
				return "", fmt.Errorf("${%s}: not a variable name (letters, digits and '_', not starting with a digit; write \"$$\" for a \"$\")", truncate(name, 40))
			}
			val, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set (named as ${%s})", name, name)
			}
			b.WriteString(val)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

func isEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Secrets in files.
//
// Every secret of the config has a twin key, its name followed by _file, that
// names a file holding it instead: a systemd credential
// (${CREDENTIALS_DIRECTORY}/name with LoadCredential=), a mounted secret, a
// file readable only by the service's user. Parse reads each such file once,
// into the secret's field, and clears the _file field: a parsed Config holds
// its secrets as values, so that a reload sees a changed file as a changed
// value. One trailing newline ("\n" or "\r\n") is dropped; an empty file is
// an error, and so is a file over maxSecretBytes. Setting both a secret and
// its _file is an error.

// maxSecretBytes bounds a secret file: a password, a token or a hash, not a
// document.
const maxSecretBytes = 64 << 10

// readSecrets reads every _file secret of c into its value (see above),
// reporting problems on v.
func (v *validator) readSecrets(c *Config) {
	v.readSecret("nats.auth.password", &c.NATS.Auth.Password, &c.NATS.Auth.PasswordFile)
	v.readSecret("nats.auth.token", &c.NATS.Auth.Token, &c.NATS.Auth.TokenFile)
	v.readSecret("nats.leaf.auth.password", &c.NATS.Leaf.Auth.Password, &c.NATS.Leaf.Auth.PasswordFile)
	v.readSecret("nats.leaf.auth.token", &c.NATS.Leaf.Auth.Token, &c.NATS.Leaf.Auth.TokenFile)
	v.readSecret("http.auth.token", &c.HTTP.Auth.Token, &c.HTTP.Auth.TokenFile)
	v.readSecret("http.auth.password_hash", &c.HTTP.Auth.PasswordHash, &c.HTTP.Auth.PasswordHashFile)
	for i := range c.Cameras {
		cam := &c.Cameras[i]
		v.readSecret(fmt.Sprintf("cameras[%d].password", i), &cam.Password, &cam.PasswordFile)
	}
}

// readSecret reads the file *file names into *value, for the secret at field,
// and clears *file. With both set it does nothing: Validate reports it.
func (v *validator) readSecret(field string, value, file *string) {
	if *file == "" || *value != "" {
		return
	}
	secret, err := readSecretFile(*file)
	if err != nil {
		v.add(field+"_file", "%v", err)
		return
	}
	*value, *file = secret, ""
}

// readSecretFile returns the secret held in the file at path. Its errors name
// the path, never the content.
func readSecretFile(path string) (string, error) {
	// Stat first: opening a FIFO or a terminal would wait for a writer.
	switch st, err := os.Stat(path); {
	case err != nil:
		return "", fmt.Errorf("cannot read %q: %s", path, pathErrReason(err))
	case st.IsDir():
		return "", fmt.Errorf("%q is a directory, want a file holding the secret", path)
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("%q is not a regular file (%s), want a file holding the secret", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %q: %s", path, pathErrReason(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %q: %s", path, pathErrReason(err))
	}
	if len(data) > maxSecretBytes {
		return "", fmt.Errorf("%q is larger than %d KiB: want a file holding only the secret", path, maxSecretBytes>>10)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%q is empty", path)
	}
	return s, nil
}

// pathErrReason is the reason of a file error without the operation and path
// that *fs.PathError puts before it ("no such file or directory").
func pathErrReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
