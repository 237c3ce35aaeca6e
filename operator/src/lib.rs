//! The dcs controller. Its reconciler arrives with the operator issue; see DESIGN.md §4.
