package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// maxFuncLines is the most lines a function may span, from its func keyword to its closing brace.
// It holds for every folder: the product, test support and test tiers, and hack/, whose
// generators and benchmarks (the fault benchmark above all) are what the project's claims rest on
// and are read and changed as often as the product.
const maxFuncLines = 80

// longFunctions lists every function of the Go code under root longer than maxFuncLines, as
// "file:line: name is n lines". Tests, generated files (those that say so in Go's "Code generated
// ... DO NOT EDIT." form) and testdata, vendor, bin and hidden folders are not read.
func longFunctions(root string) ([]string, error) {
	var long []string
	err := walkGoFiles(root, func(path, rel string) error {
		found, err := longFunctionsIn(path, rel)
		long = append(long, found...)
		return err
	})
	return long, err
}

// walkGoFiles calls visit with every Go file of the tree under root, by its path and its path
// from root: not tests nor testdata, vendor, bin and hidden folders. Generated files are visited;
// visit tells them (ast.IsGenerated).
func walkGoFiles(root string, visit func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		return visit(path, rel)
	})
}

// skipDir says whether the folder rel (named name) holds no code of the tree's own to check.
func skipDir(rel, name string) bool {
	if rel == "." {
		return false
	}
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "bin"
}

// longFunctionsIn lists the functions of one file longer than maxFuncLines; rel names the file.
func longFunctionsIn(path, rel string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var long []string
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			long = append(long, fmt.Sprintf("%s:%d: %s is %d lines", rel, start, funcName(fd), n))
		}
	}
	return long, nil
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if idx, ok := t.(*ast.IndexListExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
