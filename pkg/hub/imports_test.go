package hub

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/ocm-gitops/argocd-pull-addon/"

// TestNoControllerPackageImportsAnother: no package under pkg/hub that registers a
// controller (it calls controller-runtime's NewControllerManagedBy, ControllerManagedBy or
// controller.New) imports another such package; they share only what pkg/hub hands them
// and packages that register none (docs/design.md, section 2.1).
func TestNoControllerPackageImportsAnother(t *testing.T) {
	type pkg struct {
		registers bool
		imports   []string
	}
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		dir := filepath.ToSlash(filepath.Join("pkg/hub", filepath.Dir(path)))
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p := pkgs[dir]
		if p == nil {
			p = &pkg{}
			pkgs[dir] = p
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(path, modulePath); ok {
				p.imports = append(p.imports, rest)
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				x, _ := sel.X.(*ast.Ident)
				switch {
				case sel.Sel.Name == "NewControllerManagedBy", sel.Sel.Name == "ControllerManagedBy",
					sel.Sel.Name == "New" && x != nil && x.Name == "controller":
					p.registers = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var controllers []string
	for dir, p := range pkgs {
		if p.registers {
			controllers = append(controllers, dir)
		}
	}
	slices.Sort(controllers)
	// The check means something only if it finds the controllers.
	for _, want := range []string{"pkg/hub/appsetreport", "pkg/hub/appstatus", "pkg/hub/clustersecret", "pkg/hub/propagation", "pkg/hub/resourcetree"} {
		if !slices.Contains(controllers, want) {
			t.Errorf("%s registers no controller, by this test's reading; controllers found: %v", want, controllers)
		}
	}
	for _, dir := range controllers {
		for _, imp := range pkgs[dir].imports {
			if imp != dir && pkgs[imp] != nil && pkgs[imp].registers {
				t.Errorf("%s imports %s: both register controllers; hand what they share through pkg/hub instead", dir, imp)
			}
		}
	}
}
