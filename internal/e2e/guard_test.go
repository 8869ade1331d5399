package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTestIsGuarded reads this package's tests: each must call guard (or guardFor)
// first, after t.Parallel if it has one, so that no test can hang the suite; and a guard
// past the suite's budget (testlimit.TestLimit a test) fails its test as it starts, so
// that no test grows the suite past what CI can run.
func TestEveryTestIsGuarded(t *testing.T) {
	guard(t)
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files found: %v", err)
	}
	tests := 0
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			body := fn.Body.List
			if len(body) > 0 && isCall(body[0], "t", "Parallel") {
				body = body[1:]
			}
			if len(body) == 0 || !isCall(body[0], "", "guard") && !isCall(body[0], "", "guardFor") {
				t.Errorf("%s: %s does not start with guard(t)", file, fn.Name.Name)
			}
			for _, stmt := range body {
				if isCall(stmt, "t", "Parallel") {
					// The wait for the serial tests would count against its limit.
					t.Errorf("%s: %s calls t.Parallel after guard(t)", file, fn.Name.Name)
				}
			}
		}
	}
	if tests < 40 {
		t.Errorf("found only %d tests; is the parser reading the right files?", tests)
	}
}

// isCall says whether stmt is a call of recv.name(…), or of name(…) when recv is "".
func isCall(stmt ast.Stmt, recv, name string) bool {
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
