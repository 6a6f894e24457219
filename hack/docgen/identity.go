package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// The runtime keys brokers, routes and fault policies by strings whose parts a "/" separates
// (namespace/broker, namespace/cluster/broker, namespace/topic, namespace/cluster/topic,
// namespace/policy). Those strings are in the runtime's maps and in the resources' status, so
// a second spelling of them anywhere is a tenant's isolation waiting to break: pkg/scope writes
// and reads them, and nothing else in the product may. handBuiltIdentities enforces it: outside
// pkg/scope, tests and the notProduct folders (code the operator never links), no product code
// may
//   - glue with "/": a string concatenation with a name (anything not a literal) one of whose
//     literals starts or ends with "/" (but for a URL's "://"), or a fmt.Sprintf whose format is nothing but %s/%v verbs
//     and "/" ("%s/%s");
//   - cut on "/": a call of package strings with the literal "/" or '/' as an argument
//     (strings.Cut(id, "/"), strings.LastIndexByte(id, '/'), strings.Split(key, "/"), ...).
//
// Code that glues or cuts a "/" that is no runtime identity (a credential's "AK/date/region",
// a flag's "namespace/name" of a Kubernetes object) says so with a line comment
// "//docgen:not-identity <why>" on the line or the line above, or in the doc comment of the
// function it exempts whole; the why is required. Kubernetes objects' own names are written by
// types.NamespacedName's String, which is not flagged.

// notProduct are the folders, from the repository's root, whose code is not the product: test
// support and test tiers, and hack/ (generators, benchmarks and test tooling), none of which the
// operator, the demo, brokersim or detourctl links, and none of which keys the runtime.
var notProduct = []string{"internal/testsupport", "test", "hack"}

// identityPackage is the one folder allowed to glue and cut identities.
const identityPackage = "pkg/scope"

// notIdentity is the comment that exempts one line: it must give a reason.
const notIdentity = "//docgen:not-identity"

// cutFuncs are package strings' functions that find, cut or compare a string at a separator.
var cutFuncs = map[string]bool{
	"Cut": true, "CutPrefix": true, "CutSuffix": true, "Split": true, "SplitN": true,
	"SplitAfter": true, "SplitAfterN": true, "Index": true, "IndexByte": true, "IndexRune": true,
	"LastIndex": true, "LastIndexByte": true, "Count": true, "Contains": true, "ContainsRune": true,
	"HasPrefix": true, "HasSuffix": true, "TrimPrefix": true, "TrimSuffix": true,
}

// slashFormat matches a Sprintf format that only glues values with "/".
var slashFormat = regexp.MustCompile(`^(%[sv]|/)*/(%[sv]|/)*$`)

// handBuiltIdentities lists every place in the product's Go code under root that glues or cuts
// a "/" by hand, as "file:line: what".
func handBuiltIdentities(root string) ([]string, error) {
	var found []string
	err := walkGoFiles(root, func(path, rel string) error {
		if strings.HasPrefix(rel, identityPackage+"/") || underAny(rel, notProduct) {
			return nil
		}
		hits, err := handBuiltIdentitiesIn(path, rel)
		found = append(found, hits...)
		return err
	})
	return found, err
}

// handBuiltIdentitiesIn lists the hand-built identities of one file; rel names the file.
func handBuiltIdentitiesIn(path, rel string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil || ast.IsGenerated(f) {
		return nil, err
	}
	exempt, bad := exemptLines(fset, f)
	for _, decl := range f.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok && fd.Doc != nil && exempt[fset.Position(fd.Doc.End()).Line] {
			for l := fset.Position(fd.Pos()).Line; l <= fset.Position(fd.End()).Line; l++ {
				exempt[l] = true
			}
		}
	}
	found := make([]string, 0, len(bad))
	for _, line := range bad {
		found = append(found, fmt.Sprintf("%s:%d: %s needs a reason", rel, line, notIdentity))
	}
	report := func(n ast.Node, what string) {
		line := fset.Position(n.Pos()).Line
		if !exempt[line] && !exempt[line-1] {
			found = append(found, fmt.Sprintf("%s:%d: %s (use pkg/scope)", rel, line, what))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch e := n.(type) {
		case *ast.BinaryExpr:
			if e.Op == token.ADD && gluesSlash(e) {
				report(e, `"/" glued between names`)
				return false // one report per concatenation
			}
		case *ast.CallExpr:
			if what := slashCall(e); what != "" {
				report(e, what)
			}
		}
		return true
	})
	return found, nil
}

// exemptLines are the lines that carry a notIdentity comment with a reason, and the lines of
// those that give none. A function is exempt when the last line of its doc comment is.
func exemptLines(fset *token.FileSet, f *ast.File) (map[int]bool, []int) {
	exempt := map[int]bool{}
	var bad []int
	for _, g := range f.Comments {
		for _, c := range g.List {
			rest, ok := strings.CutPrefix(c.Text, notIdentity)
			if !ok {
				continue
			}
			line := fset.Position(c.Pos()).Line
			if strings.TrimSpace(rest) == "" {
				bad = append(bad, line)
				continue
			}
			exempt[line] = true
		}
	}
	return exempt, bad
}

// gluesSlash says whether a chain of + holds a string literal starting or ending with "/" and
// at least one operand that is not a literal.
func gluesSlash(e *ast.BinaryExpr) bool {
	var slash, name bool
	var walk func(x ast.Expr)
	walk = func(x ast.Expr) {
		switch x := ast.Unparen(x).(type) {
		case *ast.BinaryExpr:
			if x.Op == token.ADD {
				walk(x.X)
				walk(x.Y)
				return
			}
			name = true
		case *ast.BasicLit:
			if s, ok := stringLit(x); ok && !strings.HasSuffix(s, "://") { // a URL's scheme is no name
				slash = slash || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/")
			}
		default:
			name = true
		}
	}
	walk(e)
	return slash && name
}

// slashCall says what is wrong with a call that cuts on "/" or glues with it, or "".
func slashCall(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	switch {
	case pkg.Name == "strings" && cutFuncs[sel.Sel.Name]:
		for _, arg := range call.Args {
			if isSlash(arg) {
				return "strings." + sel.Sel.Name + ` on "/"`
			}
		}
	case pkg.Name == "fmt" && sel.Sel.Name == "Sprintf" && len(call.Args) > 0:
		if lit, ok := call.Args[0].(*ast.BasicLit); ok {
			if s, ok := stringLit(lit); ok && slashFormat.MatchString(s) {
				return fmt.Sprintf(`fmt.Sprintf(%q) glues names with "/"`, s)
			}
		}
	}
	return ""
}

// isSlash says whether x is the literal "/" or '/'.
func isSlash(x ast.Expr) bool {
	lit, ok := ast.Unparen(x).(*ast.BasicLit)
	if !ok {
		return false
	}
	if s, ok := stringLit(lit); ok {
		return s == "/"
	}
	return lit.Kind == token.CHAR && lit.Value == "'/'"
}

// stringLit is the value of a string literal.
func stringLit(lit *ast.BasicLit) (string, bool) {
	if lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// underAny says whether the path rel lies in one of the folders.
func underAny(rel string, folders []string) bool {
	for _, f := range folders {
		if strings.HasPrefix(rel, f+"/") {
			return true
		}
	}
	return false
}
