package testlimit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunc is a top-level test function of a package, as its source declares it.
type TestFunc struct {
	File string
	*ast.FuncDecl
}

// ReadTests parses the test files in the working folder (a test's own package) and returns
// their Test functions, TestMain aside, for checks of how a package's tests are written;
// it fails the test when it finds none.
func ReadTests(t testing.TB) []TestFunc {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files found: %v", err)
	}
	var tests []TestFunc
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv == nil && fn.Body != nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				tests = append(tests, TestFunc{File: file, FuncDecl: fn})
			}
		}
	}
	if len(tests) == 0 {
		t.Fatal("no tests found in the test files")
	}
	return tests
}

// IsCall says whether stmt is a call of recv.name(…), or of name(…) when recv is "".
func IsCall(stmt ast.Stmt, recv, name string) bool {
	expr, ok := stmt.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := expr.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return recv == "" && fun.Name == name
	case *ast.SelectorExpr:
		x, ok := fun.X.(*ast.Ident)
		return ok && x.Name == recv && fun.Sel.Name == name
	}
	return false
}
