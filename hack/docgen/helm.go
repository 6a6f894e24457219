package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// helmReference lists the chart's values: each value the schema knows, what it accepts, its
// default and the comment above it in values.yaml.
func helmReference(root string) ([]byte, error) {
	chart := filepath.Join(root, "charts", "detour")
	raw, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	rawValues, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(rawValues, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	values := map[string]valueInfo{}
	if len(doc.Content) == 1 {
		collectValues(doc.Content[0], "", values)
	}
	var b strings.Builder
	b.WriteString(header("Helm values", "charts/detour/values.schema.json and the comments in values.yaml"))
	b.WriteString("The values of `charts/detour`. The schema refuses any other key and any value outside what is listed, " +
		"naming the value.\n\n")
	b.WriteString("| value | accepts | default | meaning |\n|---|---|---|---|\n")
	walkSchema(schema, "", func(path string, s map[string]any) {
		v := values[path]
		def := "unset"
		if v.set {
			def = "`" + v.value + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", path, escapeCell(accepts(s)), def, escapeCell(v.comment))
	})
	return []byte(b.String()), nil
}

// valueInfo is one value of values.yaml: its default as YAML flow text and its comment.
type valueInfo struct {
	set            bool
	value, comment string
}

// collectValues records every key of a mapping node, nested keys as a.b.
func collectValues(n *yaml.Node, prefix string, out map[string]valueInfo) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		path := prefix + key.Value
		out[path] = valueInfo{set: true, value: flowText(val), comment: commentText(key.HeadComment)}
		collectValues(val, path+".", out)
	}
}

// flowText renders a node on one line; mappings are summarised, since their keys have rows.
func flowText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			return "{}"
		}
		return "{...}"
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			return fmt.Sprintf("%q", n.Value)
		}
		return n.Value
	default:
		c := *n
		c.Style = yaml.FlowStyle
		out, err := yaml.Marshal(&c)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
}

// commentText joins a head comment's lines without their # marks.
func commentText(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		words = append(words, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")))
	}
	return strings.Join(strings.Fields(strings.Join(words, " ")), " ")
}

// walkSchema calls fn for every property of s, depth first, in key order.
func walkSchema(s map[string]any, prefix string, fn func(string, map[string]any)) {
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, _ := props[k].(map[string]any)
		fn(prefix+k, p)
		walkSchema(p, prefix+k+".", fn)
	}
}

// accepts describes what a property's schema allows.
func accepts(s map[string]any) string {
	var parts []string
	if t, ok := s["type"]; ok {
		parts = append(parts, fmt.Sprint(t))
	}
	if e, ok := s["enum"].([]any); ok {
		var vals []string
		for _, v := range e {
			vals = append(vals, fmt.Sprintf("`%v`", v))
		}
		parts = append(parts, "one of "+strings.Join(vals, ", "))
	}
	for _, k := range []string{"minimum", "maximum", "minLength", "maxLength", "pattern", "format"} {
		if v, ok := s[k]; ok {
			parts = append(parts, fmt.Sprintf("%s `%v`", k, v))
		}
	}
	if len(parts) == 0 {
		return "see the schema"
	}
	return strings.Join(parts, "; ")
}
