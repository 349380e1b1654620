package e2ebench

import "testing"

func TestTriggerStampsSampleEveryWriteOfATriggerTime(t *testing.T) {
	type write struct {
		slice, stamp   string
		sample, repeat bool
	}
	cases := []struct {
		name   string
		before map[string]string
		writes []write
	}{
		{
			name: "a slice rewritten with the same trigger time is sampled each time, marked repeat after the first",
			writes: []write{
				{"a", "t1", true, false},
				{"a", "t1", true, true},
				{"a", "t2", true, false},
				{"a", "t2", true, true},
			},
		},
		{
			name:   "the trigger time a slice carried before the watch measures nothing, until it changes",
			before: map[string]string{"a": "t0"},
			writes: []write{
				{"a", "t0", false, false},
				{"a", "t1", true, false},
				{"a", "t0", true, false},
			},
		},
		{
			name: "writes without a trigger time are no samples and do not reset the slice's last one",
			writes: []write{
				{"a", "t1", true, false},
				{"a", "", false, false},
				{"a", "t1", true, true},
			},
		},
		{
			name: "slices are followed apart",
			writes: []write{
				{"a", "t1", true, false},
				{"b", "t1", true, false},
				{"b", "t1", true, true},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stamps := newTriggerStamps()
			for k, v := range tc.before {
				stamps.before[k] = v
			}
			for i, w := range tc.writes {
				sample, repeat := stamps.observe(w.slice, w.stamp)
				if sample != w.sample || repeat != w.repeat {
					t.Errorf("write %d (%s, %q): sample %t repeat %t, want %t and %t", i, w.slice, w.stamp, sample, repeat, w.sample, w.repeat)
				}
			}
		})
	}
}
