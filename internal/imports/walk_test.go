package imports

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestOnePassReadsFromTheExecutorsFiles walks one pass of the cluster workflow as a reader
// would: from the executor's convergeOnce, into each function of the entity it calls
// (depth first, in the order the calls appear, each function once), and back. A reader of
// the pass may come back to the executor's files (those holding its methods) as often as
// the pass does; any other file of the entity it leaves, it must not have to enter again.
// Calls into another package (a concept, the planner) are read through that package's API
// and not followed; so are calls to the cluster's own API, the methods a concept's Cluster
// interface declares (Touch, SetPhase ...), as a concept's call through that interface is.
func TestOnePassReadsFromTheExecutorsFiles(t *testing.T) {
	w := walkFrom(t, "workflows/cluster", "executor", "convergeOnce", "")
	reentered := w.reentered()
	t.Logf("one pass walks %d files of the entity: %s; comes back to the executor's %v", len(w.files()), strings.Join(w.files(), " "), reentered)
	for file, n := range reentered {
		if !w.executorFiles[file] {
			t.Errorf("one pass enters %s %d more times after leaving it; a pass reads from the executor's files and the APIs of the concepts", file, n)
		}
	}
}

// TestADownReportIsHealthsAndThePlanners walks a report of a member's health from
// health.Machine.Report, through what the state machine does with it, up to the start of a
// replacement (a new generation the pass then carries out): it calls into no concept but
// the planner, the contract's types and the metrics it records. Setting a member that is
// being set up elsewhere (rehome, for a host lost) is another walk: it stops the member's
// run (the role runner) and asks the hosts' view whether its old host is reachable.
func TestADownReportIsHealthsAndThePlanners(t *testing.T) {
	w := walkFrom(t, "workflows/health", "Machine", "Report", "rehome")
	for _, p := range w.calledPackages {
		switch strings.TrimPrefix(p, module+"/") {
		case "workflows", "workflows/plan", "workflows/internal/flow", "workflows/internal/change", "workflows/internal/metric", "spec":
		default:
			if strings.HasPrefix(p, module) {
				t.Errorf("a down report's walk calls into %s", p)
			}
		}
	}
	if !slices.Contains(w.visited, "replace") {
		t.Errorf("the walk did not reach replace: %v", w.visited)
	}
	t.Logf("a down report walks %s, calling into %v", strings.Join(w.files(), " "), w.calledPackages)
}

// walk is the way a reader goes from one function: the files, as entered and returned to.
type walk struct {
	sequence       []string
	visited        []string // the functions read, in order
	calledPackages []string // other packages called into, not followed
	executorFiles  map[string]bool
}

func (w walk) files() []string {
	var distinct []string
	for _, f := range w.sequence {
		if !slices.Contains(distinct, f) {
			distinct = append(distinct, f)
		}
	}
	sort.Strings(distinct)
	return distinct
}

// reentered counts, for each file, how often the walk came back to it after leaving it.
func (w walk) reentered() map[string]int {
	left := map[string]bool{}
	reentered := map[string]int{}
	for i := 1; i < len(w.sequence); i++ {
		if w.sequence[i] == w.sequence[i-1] {
			continue
		}
		left[w.sequence[i-1]] = true
		if left[w.sequence[i]] {
			reentered[w.sequence[i]]++
		}
	}
	return reentered
}

// walkFrom walks from the method recv.name of a package under the module: into each function
// of that package it calls (depth first, in the order the calls appear, each function once,
// but not skip), and back. Calls into another package are read through its API and not
// followed; so are calls to the cluster's own API, the methods a concept's Cluster interface
// declares (Touch, SetPhase ...), as a concept's call through that interface is.
func walkFrom(t *testing.T, pkgPath, recv, name, skip string) walk {
	t.Helper()
	fset, files, info, pkg := typeCheck(t, module+"/"+pkgPath)
	api := clusterAPI(pkg)
	bodies := map[*types.Func]*ast.FuncDecl{}
	fileOf := map[*types.Func]string{}
	w := walk{executorFiles: map[string]bool{}}
	var root *types.Func
	for _, f := range files {
		file := filepath.Base(fset.File(f.Pos()).Name())
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := info.Defs[fd.Name].(*types.Func)
			bodies[fn], fileOf[fn] = fd, file
			if receiverName(fn) == "executor" {
				w.executorFiles[file] = true
			}
			if receiverName(fn) == recv && fn.Name() == name {
				root = fn
			}
		}
	}
	if root == nil {
		t.Fatalf("no %s.%s in %s", recv, name, pkgPath)
	}
	seen := map[*types.Func]bool{}
	var visit func(fn *types.Func)
	visit = func(fn *types.Func) {
		seen[fn] = true
		file := fileOf[fn]
		w.sequence, w.visited = append(w.sequence, file), append(w.visited, fn.Name())
		var callees []*types.Func
		ast.Inspect(bodies[fn].Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch f := ast.Unparen(call.Fun).(type) {
			case *ast.Ident:
				id = f
			case *ast.SelectorExpr:
				id = f.Sel
			}
			callee, ok := info.Uses[id].(*types.Func)
			switch {
			case !ok:
			case bodies[callee] != nil:
				callees = append(callees, callee) // ast.Inspect goes in source order
			case callee.Pkg() != nil && callee.Pkg() != pkg && !slices.Contains(w.calledPackages, callee.Pkg().Path()):
				w.calledPackages = append(w.calledPackages, callee.Pkg().Path())
			}
			return true
		})
		for _, callee := range callees {
			r := receiverName(callee)
			if seen[callee] || callee.Name() == skip || api[callee.Name()] && (r == "cluster" || r == "clusterWorkflow") {
				continue
			}
			visit(callee)
			w.sequence = append(w.sequence, file)
		}
	}
	visit(root)
	sort.Strings(w.calledPackages)
	return w
}

func receiverName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}

// clusterAPI names the methods the concepts' Cluster interfaces declare.
func clusterAPI(pkg *types.Package) map[string]bool {
	api := map[string]bool{}
	for _, imp := range pkg.Imports() {
		if !strings.HasPrefix(imp.Path(), module+"/workflows/") {
			continue
		}
		if tn, ok := imp.Scope().Lookup("Cluster").(*types.TypeName); ok {
			if it, ok := tn.Type().Underlying().(*types.Interface); ok {
				for i := range it.NumMethods() {
					api[it.Method(i).Name()] = true
				}
			}
		}
	}
	return api
}

// typeCheck parses a package of the module (its non-test files) and type-checks it, its
// dependencies read from the export data the go command builds.
func typeCheck(t *testing.T, path string) (*token.FileSet, []*ast.File, *types.Info, *types.Package) {
	t.Helper()
	exports := map[string]string{}
	var target listed
	for _, p := range goList(t, "ImportPath,Dir,Export,GoFiles", "-deps", "-export", path) {
		exports[p.ImportPath] = p.Export
		if p.ImportPath == path {
			target = p
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(path, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	return fset, files, info, pkg
}
