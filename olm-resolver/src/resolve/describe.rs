//! Requirements and constraints in words, as explanations and plans print them.

use super::*;

/// A requirement in words, as explanations and plans print it.
pub fn describe_requirement(requirement: &Requirement) -> String {
    match requirement {
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::Property,
        } => format!("API {gvk}"),
        Requirement::Gvk {
            gvk,
            source: GvkRequirementSource::CsvRequiredCrd,
        } => {
            format!("API {gvk} (a required CRD of its CSV)")
        }
        Requirement::Package { package, range } => format!("package {package} in range {range}"),
        Requirement::Constraint(constraint) => format!("olm.constraint {}", describe_kind(&constraint.kind)),
    }
}

pub(super) fn describe_kind(kind: &ConstraintKind) -> String {
    let list = |children: &[crate::model::Constraint]| {
        children
            .iter()
            .map(|c| describe_kind(&c.kind))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match kind {
        ConstraintKind::Gvk(gvk) => format!("API {gvk}"),
        ConstraintKind::Package {
            package,
            range: Some(range),
        } => format!("package {package} in range {range}"),
        ConstraintKind::Package { package, range: None } => format!("package {package}"),
        ConstraintKind::All(children) => format!("all of [{}]", list(children)),
        ConstraintKind::Any(children) => format!("any of [{}]", list(children)),
        ConstraintKind::Not(children) => format!("none of [{}]", list(children)),
        ConstraintKind::Cel { rule } => format!("cel {rule:?}"),
    }
}
