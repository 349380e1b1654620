// Package clusterselect is KEP-5939's cluster selection, without client calls: it reads and
// validates the ordered cluster selectors a ServiceExport carries (annotation
// fleetslice.io/cluster-selectors, the JSON of the KEP's clusterSelectors field), and evaluates
// them for one importing cluster against the exporting clusters' ClusterProperties, giving the
// ordered results the KEP reports in ServiceImport.status.clusterSelectorResults.
//
// Rules, each with its test:
//   - At most 16 selectors; each has a propertySelector that is not empty; keys are
//     ClusterProperty names (DNS-1123 subdomains); In and NotIn have values, Exists and
//     DoesNotExist none; values are not restricted to label syntax (Validate, reason
//     InvalidClusterSelector on the export).
//   - "@SameAsImporter@" stands for the importing cluster's value of the same property; when
//     the importer has no such property the selector matches no cluster (Evaluate).
//   - Matching follows metav1.LabelSelector: requirements are ANDed, NotIn and DoesNotExist
//     match a cluster without the property. One fleetslice rule on top: a cluster that lacks a
//     property some selector compares values of (matchProperties, In, NotIn) is in no result,
//     so it is reached only through the fallback to all clusters, and Missing names it, so
//     that a member missing its region is told about instead of landing in a tier by accident.
//   - Results list cluster ids ascending and never depend on endpoint conditions.
package clusterselect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// Selector is one entry of a clusterSelectors list.
type Selector = v1alpha1.ClusterSelector

// maxValueBytes bounds one value: a ClusterProperty's value is at most 128 KiB (KEP-2149).
const maxValueBytes = 128 * 1024

// Parse reads the annotation value: a JSON list of selectors, with no unknown fields. It does not
// validate them; see Validate.
func Parse(value string) ([]Selector, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	var out []Selector
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s is not a JSON list of cluster selectors: %w", v1alpha1.AnnotationClusterSelectors, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s holds more than one JSON value", v1alpha1.AnnotationClusterSelectors)
	}
	return out, nil
}

// Validate says what is wrong with selectors, one error per problem with its path, or nil.
func Validate(selectors []Selector) error {
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationClusterSelectors)
	var errs field.ErrorList
	if len(selectors) > v1alpha1.MaxClusterSelectors {
		errs = append(errs, field.TooMany(path, len(selectors), v1alpha1.MaxClusterSelectors))
	}
	for i, s := range selectors {
		p := path.Index(i).Child("propertySelector")
		ps := s.PropertySelector
		if ps == nil || (len(ps.MatchProperties) == 0 && len(ps.MatchExpressions) == 0) {
			errs = append(errs, field.Required(p, "a cluster selector needs a propertySelector that is not empty"))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(ps.MatchProperties)) {
			errs = append(errs, validateKey(p.Child("matchProperties").Key(k), k)...)
			errs = append(errs, validateValue(p.Child("matchProperties").Key(k), ps.MatchProperties[k])...)
		}
		for j, r := range ps.MatchExpressions {
			errs = append(errs, validateRequirement(p.Child("matchExpressions").Index(j), r)...)
		}
	}
	return errs.ToAggregate()
}

func validateRequirement(p *field.Path, r v1alpha1.PropertySelectorRequirement) field.ErrorList {
	errs := validateKey(p.Child("key"), r.Key)
	switch r.Operator {
	case v1alpha1.PropertySelectorOpIn, v1alpha1.PropertySelectorOpNotIn:
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(p.Child("values"), "In and NotIn need at least one value"))
		}
	case v1alpha1.PropertySelectorOpExists, v1alpha1.PropertySelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			errs = append(errs, field.Forbidden(p.Child("values"), "Exists and DoesNotExist take no values"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, []string{"In", "NotIn", "Exists", "DoesNotExist"}))
	}
	for k, v := range r.Values {
		errs = append(errs, validateValue(p.Child("values").Index(k), v)...)
	}
	return errs
}

func validateKey(p *field.Path, key string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(key) {
		errs = append(errs, field.Invalid(p, key, "not a ClusterProperty name: "+msg))
	}
	return errs
}

func validateValue(p *field.Path, value string) field.ErrorList {
	if len(value) > maxValueBytes {
		return field.ErrorList{field.TooLong(p, "", maxValueBytes)}
	}
	return nil
}

// Equal reports whether two lists select the same way: the same selectors in the same order,
// with unset and empty one value.
func Equal(a, b []Selector) bool {
	return Format(a) == Format(b)
}

// Format writes selectors as the annotation value; "" for none. Maps encode with sorted keys
// and empty parts are left out, so equal lists give equal strings.
func Format(selectors []Selector) string {
	if len(selectors) == 0 {
		return ""
	}
	out := make([]Selector, len(selectors))
	for i, s := range selectors {
		if s.PropertySelector == nil {
			continue
		}
		ps := *s.PropertySelector
		if len(ps.MatchProperties) == 0 {
			ps.MatchProperties = nil
		}
		if len(ps.MatchExpressions) == 0 {
			ps.MatchExpressions = nil
		}
		for j := range ps.MatchExpressions {
			if len(ps.MatchExpressions[j].Values) == 0 {
				ps.MatchExpressions = slices.Clone(ps.MatchExpressions)
				ps.MatchExpressions[j].Values = nil
			}
		}
		out[i].PropertySelector = &ps
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "" // strings and lists of strings always encode
	}
	return string(b)
}

// Clone deep-copies selectors, nil for none.
func Clone(selectors []Selector) []Selector {
	if len(selectors) == 0 {
		return nil
	}
	out := make([]Selector, len(selectors))
	for i := range selectors {
		selectors[i].DeepCopyInto(&out[i])
	}
	return out
}
