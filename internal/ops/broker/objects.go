// Package broker prepares a ClusterSet's broker: the namespace members publish into, the RBAC
// that lets each member read everything there but write only records, EndpointSlice copies and
// its own Lease, the ValidatingAdmissionPolicies that refuse a write labelled with another
// member's cluster id, and one ServiceAccount identity (and kubeconfig) per member.
//
// It is tooling (the local ClusterSet, end-to-end benchmarks, tests), not runtime: it installs
// CRDs and issues tokens, which a member's manager never does, so it lives outside controllers/.
package broker

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

const (
	// DefaultNamespace is the broker namespace `fleetslice up` uses, the one members default to.
	DefaultNamespace = multicluster.DefaultNamespace
	// MemberRoleName is the Role every member identity is bound to.
	MemberRoleName = "fleetslice-member"
	// MemberPrefix starts every member's ServiceAccount name: member-<cluster id>.
	MemberPrefix = liveness.LeasePrefix
	// LabelPartOf marks every object Prepare writes.
	LabelPartOf = "app.kubernetes.io/part-of"
	partOf      = "fleetslice"
)

// ServiceAccountName returns the broker identity of cluster.
func ServiceAccountName(cluster string) string {
	return MemberPrefix + cluster
}

// ownershipPolicyName and recordPolicyName are cluster-scoped, so they carry the namespace:
// one broker may serve several ClusterSets.
func ownershipPolicyName(namespace string) string {
	return "fleetslice-broker-ownership." + namespace
}

func recordPolicyName(namespace string) string {
	return "fleetslice-broker-records." + namespace
}

func labels() map[string]string {
	return map[string]string{LabelPartOf: partOf}
}

// SharedObjects returns the broker objects that do not depend on the members: the namespace,
// the member Role, the admission policies with their bindings, and the API Priority and
// Fairness objects that keep members' requests fair to each other.
func SharedObjects(namespace string) []client.Object {
	return append([]client.Object{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels()},
		},
		memberRole(namespace),
		ownershipPolicy(namespace),
		binding(ownershipPolicyName(namespace), namespace),
		recordPolicy(namespace),
		binding(recordPolicyName(namespace), namespace),
	}, flowControlObjects(namespace)...)
}

// MemberObjects returns one member's identity: its ServiceAccount and RoleBinding.
func MemberObjects(namespace, cluster string) []client.Object {
	name := ServiceAccountName(cluster)
	memberLabels := labels()
	memberLabels[mcsv1beta1.LabelSourceCluster] = cluster
	return []client.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: memberLabels},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: memberLabels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: MemberRoleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		},
	}
}

func memberRole(namespace string) *rbacv1.Role {
	read := []string{"get", "list", "watch"}
	write := []string{"create", "update", "patch", "delete"}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: MemberRoleName, Labels: labels()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"serviceexportrecords"}, Verbs: append(read, write...)},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: append(read, write...)},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: append(read, write...)},
		},
	}
}

// userPrefix is the username every member identity of namespace starts with.
func userPrefix(namespace string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, MemberPrefix)
}

// labelOf is a CEL expression for the source-cluster label of obj (” when absent).
func labelOf(obj string) string {
	return fmt.Sprintf("%[1]s != null && has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels ? %[1]s.metadata.labels['%[2]s'] : ''",
		obj, mcsv1beta1.LabelSourceCluster)
}

func memberMatch(namespace string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{
		Name:       "member-identity",
		Expression: fmt.Sprintf("request.userInfo.username.startsWith('%s')", userPrefix(namespace)),
	}}
}

func rule(group, resource string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{group},
			APIVersions: []string{"*"},
			Resources:   []string{resource},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}
}

// ownershipPolicy refuses a member's write unless the object's source-cluster label, before
// and after, names the writing member; a new record or slice copy must be named "<its id>.",
// and a Lease after it.
func ownershipPolicy(namespace string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	prefix := userPrefix(namespace)
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: ownershipPolicyName(namespace), Labels: labels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					{RuleWithOperations: rule(v1alpha1.GroupVersion.Group, "serviceexportrecords")},
					{RuleWithOperations: rule("discovery.k8s.io", "endpointslices")},
					{RuleWithOperations: rule("coordination.k8s.io", "leases")},
				},
			},
			MatchConditions: memberMatch(namespace),
			Variables: []admissionregistrationv1.Variable{
				{Name: "newCluster", Expression: labelOf("object")},
				{Name: "oldCluster", Expression: labelOf("oldObject")},
				{Name: "owner", Expression: "request.operation == 'DELETE' ? variables.oldCluster : variables.newCluster"},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression:        fmt.Sprintf("request.operation == 'DELETE' || (variables.newCluster != '' && '%s' + variables.newCluster == request.userInfo.username)", prefix),
					MessageExpression: fmt.Sprintf("request.userInfo.username + ' may not write an object whose %s label is ' + (variables.newCluster == '' ? 'missing' : variables.newCluster)", mcsv1beta1.LabelSourceCluster),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        fmt.Sprintf("request.operation == 'CREATE' || (variables.oldCluster != '' && '%s' + variables.oldCluster == request.userInfo.username)", prefix),
					MessageExpression: "request.userInfo.username + ' may not change or delete an object written by cluster ' + variables.oldCluster",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					// Names are deterministic, so a member that took another's name first would
					// keep it from ever publishing: names.RecordName starts every name with the
					// owner's id and a dot. Only creates are judged; an object's name never changes.
					Expression:        "request.operation != 'CREATE' || request.resource.resource == 'leases' || object.metadata.name.startsWith(variables.newCluster + '.')",
					MessageExpression: "request.userInfo.username + ' may only create objects named ' + variables.newCluster + '.<...>, not ' + object.metadata.name",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        fmt.Sprintf("request.resource.resource != 'leases' || request.name == '%s' + variables.owner", MemberPrefix),
					MessageExpression: fmt.Sprintf("'a member may only write its own Lease, %s' + variables.owner", MemberPrefix),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// recordPolicy refuses a record whose spec names another cluster than its label: the merge
// reads the spec, so a label alone would not stop a member from speaking for another.
func recordPolicy(namespace string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: recordPolicyName(namespace), Labels: labels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
							Resources: []string{"serviceexportrecords"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
						},
					},
				}},
			},
			MatchConditions: memberMatch(namespace),
			Validations: []admissionregistrationv1.Validation{{
				Expression:        fmt.Sprintf("'%s' + object.spec.clusterID == request.userInfo.username", userPrefix(namespace)),
				MessageExpression: "'spec.clusterID ' + object.spec.clusterID + ' is not the writing member ' + request.userInfo.username",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

func binding(policy, namespace string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: policy, Labels: labels()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
			},
		},
	}
}
