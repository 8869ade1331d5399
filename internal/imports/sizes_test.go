package imports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bounds that keep every package under workflows/ something one person can hold: a type's
// method set (what it embeds counted), a file, and a package, in non-test lines.
const (
	maxMethodSet    = 40
	maxFileLines    = 400
	maxPackageLines = 2500
)

// TestWorkflowPackagesStaySmall checks the bounds on every package under workflows/.
func TestWorkflowPackagesStaySmall(t *testing.T) {
	root := filepath.Join("..", "..", "workflows")
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			return err
		}
		checkPackage(t, dir)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkPackage(t *testing.T, dir string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		methods := map[string]map[string]bool{}
		embeds := map[string][]string{}
		lines := 0
		for name, f := range pkg.Files {
			n := fset.File(f.Pos()).LineCount()
			lines += n
			if n > maxFileLines {
				t.Errorf("%s has %d lines; at most %d", name, n, maxFileLines)
			}
			collect(f, methods, embeds)
		}
		if lines > maxPackageLines {
			t.Errorf("package %s has %d non-test lines; at most %d", dir, lines, maxPackageLines)
		}
		for typ := range methods {
			set := map[string]bool{}
			methodSet(typ, methods, embeds, set, map[string]bool{})
			if len(set) > maxMethodSet {
				t.Errorf("type %s in %s has %d methods, embedded ones counted; at most %d", typ, dir, len(set), maxMethodSet)
			}
		}
	}
}

// collect records, for one file, each type's own methods and the types its struct embeds
// (those of its own package: the bounds are about what the package's authors hold).
func collect(f *ast.File, methods map[string]map[string]bool, embeds map[string][]string) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				continue
			}
			typ := typeName(d.Recv.List[0].Type)
			if methods[typ] == nil {
				methods[typ] = map[string]bool{}
			}
			methods[typ][d.Name.Name] = true
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok {
					continue
				}
				if methods[ts.Name.Name] == nil {
					methods[ts.Name.Name] = map[string]bool{}
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, field := range st.Fields.List {
					if len(field.Names) == 0 {
						embeds[ts.Name.Name] = append(embeds[ts.Name.Name], typeName(field.Type))
					}
				}
			}
		}
	}
}

func typeName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.X.(*ast.Ident).Name + "." + e.Sel.Name
	}
	return ""
}

func methodSet(typ string, methods map[string]map[string]bool, embeds map[string][]string, into, seen map[string]bool) {
	if seen[typ] {
		return
	}
	seen[typ] = true
	for m := range methods[typ] {
		into[m] = true
	}
	for _, e := range embeds[typ] {
		methodSet(e, methods, embeds, into, seen)
	}
}
