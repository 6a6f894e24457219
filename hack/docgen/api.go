package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// apiReference documents every type of api/v1alpha1 from its source: each struct's fields with
// their JSON names, Go types, godoc and kubebuilder markers, and each named string type.
func apiReference(root string) ([]byte, error) {
	dir := filepath.Join(root, "api", "v1alpha1")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && !strings.HasPrefix(n, "zz_generated") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(header("API reference: routing.detour.dev/v1alpha1", "api/v1alpha1"))
	b.WriteString("Every type of the `routing.detour.dev/v1alpha1` API, file by file in source order. " +
		"Markers are the validation the API server applies (kubebuilder markers and CEL rules, with the message a refusal shows).\n\n")
	fset := token.NewFileSet()
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		writeFileTypes(&b, f)
	}
	return []byte(b.String()), nil
}

// writeFileTypes writes every exported type declared in f.
func writeFileTypes(b *strings.Builder, f *ast.File) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			if !ts.Name.IsExported() {
				continue
			}
			doc := ts.Doc
			if doc == nil {
				doc = gd.Doc
			}
			text, markers := splitDoc(doc)
			fmt.Fprintf(b, "## %s\n\n", ts.Name.Name)
			if text != "" {
				b.WriteString(text + "\n\n")
			}
			writeMarkers(b, markers)
			if st, ok := ts.Type.(*ast.StructType); ok {
				writeFields(b, st)
			} else {
				fmt.Fprintf(b, "Underlying type: `%s`.\n\n", exprString(ts.Type))
			}
		}
	}
}

// writeFields writes a struct's fields as a table.
func writeFields(b *strings.Builder, st *ast.StructType) {
	b.WriteString("| field | type | description |\n|---|---|---|\n")
	for _, field := range st.Fields.List {
		name, inline := jsonName(field)
		if name == "-" {
			continue
		}
		text, markers := splitDoc(field.Doc)
		if inline {
			name = "(inline)"
		}
		desc := text
		if len(markers) > 0 {
			var spans []string
			for _, m := range markers {
				spans = append(spans, codeSpan(m))
			}
			desc += " Markers: " + strings.Join(spans, ", ") + "."
		}
		if optional(field, markers) {
			desc = "Optional. " + desc
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", name, exprString(field.Type), escapeCell(desc))
	}
	b.WriteString("\n")
}

// writeMarkers lists a type's markers.
func writeMarkers(b *strings.Builder, markers []string) {
	if len(markers) == 0 {
		return
	}
	b.WriteString("Markers:\n\n")
	for _, m := range markers {
		fmt.Fprintf(b, "- %s\n", codeSpan(m))
	}
	b.WriteString("\n")
}

// splitDoc separates a comment's prose from its +markers.
func splitDoc(g *ast.CommentGroup) (string, []string) {
	if g == nil {
		return "", nil
	}
	var prose, markers []string
	for _, c := range g.List {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
		if strings.HasPrefix(line, "+") {
			markers = append(markers, strings.TrimPrefix(line, "+"))
			continue
		}
		prose = append(prose, line)
	}
	return strings.Join(strings.Fields(strings.Join(prose, " ")), " "), markers
}

// jsonName is a field's JSON name and whether it is inlined.
func jsonName(f *ast.Field) (string, bool) {
	if f.Tag != nil {
		tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			return "", true
		}
		if name != "" {
			return name, false
		}
	}
	if len(f.Names) > 0 {
		return f.Names[0].Name, false
	}
	return exprString(f.Type), true
}

// optional says whether a field may be left out.
func optional(f *ast.Field, markers []string) bool {
	for _, m := range markers {
		if m == "optional" || strings.HasPrefix(m, "kubebuilder:default") {
			return true
		}
	}
	if f.Tag != nil {
		tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
		return strings.Contains(tag, "omitempty") || strings.Contains(tag, "omitzero")
	}
	return false
}

// exprString renders a type expression as Go source.
func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	default:
		return fmt.Sprintf("%T", e)
	}
}

// codeSpan renders s as inline code; text holding backticks (patterns) is fenced by two.
func codeSpan(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}
