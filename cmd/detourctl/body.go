package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/detourmq/detour/pkg/producer"
)

// propertyFlags collects repeated --property key=value values.
type propertyFlags map[string]string

// String renders the flag values for flag's help output.
func (p *propertyFlags) String() string {
	var parts []string
	for k, v := range *p {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// Set adds one key=value property; a key may be given once.
func (p *propertyFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if *p == nil {
		*p = propertyFlags{}
	}
	if _, dup := (*p)[k]; dup {
		return fmt.Errorf("property %s given twice", k)
	}
	(*p)[k] = val
	return nil
}

// messageBody is --body, the contents of --body-file (standard input for -), or a generated body
// of --size bytes. A body from a file is refused when it is empty or larger than RocketMQ's
// 4 MiB, before anything is sent.
func messageBody(c *sendConfig, stdin io.Reader) ([]byte, error) {
	switch {
	case c.body != "":
		return []byte(c.body), nil
	case c.bodyFile != "":
		return readBody(c.bodyFile, stdin)
	}
	body := make([]byte, c.size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	return body, nil
}

// readBody reads at most one byte more than a message may hold, so an oversized file costs no
// more than the limit.
func readBody(path string, stdin io.Reader) ([]byte, error) {
	r, name := stdin, "standard input"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--body-file: %w", err)
		}
		defer f.Close()
		r, name = f, path
	}
	body, err := io.ReadAll(io.LimitReader(r, producer.MaxMessageSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("--body-file: reading %s: %w", name, err)
	case len(body) == 0:
		return nil, fmt.Errorf("--body-file: %s is empty; RocketMQ refuses an empty body", name)
	case len(body) > producer.MaxMessageSize:
		return nil, fmt.Errorf("--body-file: %s holds more than %d bytes, RocketMQ's limit for a message body", name, producer.MaxMessageSize)
	}
	return body, nil
}
