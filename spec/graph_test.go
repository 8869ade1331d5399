package spec

import (
	"reflect"
	"testing"
)

func roles(deps map[string][]string) []Role {
	var out []Role
	for _, name := range sortedKeys(deps) {
		out = append(out, Role{Name: name, DependsOn: deps[name]})
	}
	return out
}

func TestLevels(t *testing.T) {
	tests := []struct {
		name string
		deps map[string][]string
		want [][]string
	}{
		{"single", map[string][]string{"a": nil}, [][]string{{"a"}}},
		{"chain", map[string][]string{"edge": {"worker"}, "worker": {"controller"}, "controller": nil}, [][]string{{"controller"}, {"worker"}, {"edge"}}},
		{"independent roles share a level, sorted", map[string][]string{"z": nil, "b": nil, "m": {"z"}}, [][]string{{"b", "z"}, {"m"}}},
		{"level is one past the deepest dependency", map[string][]string{"a": nil, "b": {"a"}, "c": {"a", "b"}, "d": {"a"}}, [][]string{{"a"}, {"b", "d"}, {"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Levels(roles(tt.deps))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLevelsIgnoresSpecOrder(t *testing.T) {
	forward := []Role{{Name: "a"}, {Name: "b", DependsOn: []string{"a"}}, {Name: "c", DependsOn: []string{"a"}}}
	backward := []Role{forward[2], forward[1], forward[0]}
	l1, _ := Levels(forward)
	l2, _ := Levels(backward)
	if !reflect.DeepEqual(l1, l2) {
		t.Errorf("plan depends on spec order: %v vs %v", l1, l2)
	}
}

func TestLevelsRejectsCycles(t *testing.T) {
	if _, err := Levels(roles(map[string][]string{"a": {"b"}, "b": {"a"}})); err == nil {
		t.Error("cycle not detected")
	}
}

func TestCycles(t *testing.T) {
	got := Cycles(roles(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "x": {"y"}, "y": {"x"}, "ok": nil}))
	want := [][]string{{"a", "b", "c", "a"}, {"x", "y", "x"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
