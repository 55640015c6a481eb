"""Customer relationship manager tools (WorkBench ``customer_relationship_manager.*``).

Semantics as WorkBench implements them: search needs at least one filter;
text filters match case-insensitively as substrings (a customer without the
field never matches), date bounds compare as text against ``YYYY-MM-DD``
(inclusive); at most 5 customers, in table order.  Statuses and product
interests are checked against fixed lists on update (not on add); emails are
stored lower-cased; a new customer gets the largest id + 1, zero-padded.
"""

from __future__ import annotations

from typing import Any

from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolspec import ToolError, next_id, tool

TABLE = "customer_relationship_manager"
STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")
UPDATABLE = ("customer_name", "assigned_to_email", "customer_email", "customer_phone", "last_contact_date",
             "product_interest", "status", "notes", "follow_up_by")
_TEXT_FILTERS = ("customer_name", "customer_email", "product_interest", "status", "assigned_to_email")
_DATE_FILTERS = (("last_contact_date_min", "last_contact_date", 1), ("last_contact_date_max", "last_contact_date", -1),
                 ("follow_up_by_min", "follow_up_by", 1), ("follow_up_by_max", "follow_up_by", -1))


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _matches(row: dict[str, Any], filters: dict[str, str | None]) -> bool:
    for field in _TEXT_FILTERS:
        want = filters.get(field)
        if want and (row[field] is None or want.lower() not in row[field].lower()):
            return False
    for arg, field, sign in _DATE_FILTERS:
        bound = filters.get(arg)
        if bound and (row[field] is None or (row[field] < bound if sign > 0 else row[field] > bound)):
            return False
    return True


def search_customers(state: WorkbenchState, **filters: str | None) -> list[dict[str, Any]]:
    if not any(filters.values()):
        raise ToolError("No search parameters provided. Please provide at least one parameter.")
    return [dict(r) for r in state.table(TABLE).rows if _matches(r, filters)][:5]


def update_customer(state: WorkbenchState, customer_id: str | None = None, field: str | None = None,
                    new_value: str | None = None) -> str:
    if not customer_id or not field or not new_value:
        raise ToolError("Customer ID, field, or new value not provided.")
    if field == "status" and new_value not in STATUSES:
        raise ToolError(f"Status not valid. Please choose from: {_choices(STATUSES)}")
    if field == "product_interest" and new_value not in PRODUCTS:
        raise ToolError(f"Product interest not valid. Please choose from: {_choices(PRODUCTS)}")
    if field in ("customer_email", "assigned_to_email"):
        new_value = new_value.lower()
    table = state.table(TABLE)
    if table.find(customer_id) is None:
        raise ToolError("Customer not found.")
    if field not in table.columns:
        raise ToolError(f"Field not valid. Please choose from: {_choices(UPDATABLE)}")
    for row in table.rows:
        if row["customer_id"] == customer_id:
            row[field] = new_value
    return "Customer updated successfully."


def add_customer(state: WorkbenchState, customer_name: str | None = None, assigned_to_email: str | None = None,
                 status: str | None = None, customer_email: str | None = None, customer_phone: str | None = None,
                 last_contact_date: str | None = None, product_interest: str | None = None,
                 notes: str | None = None, follow_up_by: str | None = None) -> str:
    if not (customer_name and assigned_to_email and status):
        raise ToolError("Please provide all required fields: customer_name, assigned_to_email, status.")
    new_id = next_id(state, TABLE)
    state.table(TABLE).rows.append({
        "customer_id": new_id, "assigned_to_email": assigned_to_email.lower(), "customer_name": customer_name,
        "customer_email": customer_email.lower() if customer_email else customer_email,
        "customer_phone": customer_phone, "last_contact_date": last_contact_date,
        "product_interest": product_interest, "status": status, "follow_up_by": follow_up_by,
        "notes": notes if notes is not None else "",  # WorkBench's default for notes is "", not missing
    })
    return new_id


def delete_customer(state: WorkbenchState, customer_id: str | None = None) -> str:
    if not customer_id:
        raise ToolError("Customer ID not provided.")
    table = state.table(TABLE)
    if table.find(customer_id) is None:
        raise ToolError("Customer not found.")
    table.rows[:] = [r for r in table.rows if r["customer_id"] != customer_id]
    return "Customer deleted successfully."


_DATE = 'Format "YYYY-MM-DD".'
TOOLS = [
    tool("customer_relationship_manager.search_customers", search_customers,
         "Search customers by any of the filters (at least one); returns at most 5 customer records.",
         side_effects=False,
         customer_name="Name of the customer (part of it matches).", customer_email="Email address of the customer.",
         product_interest=f"Product interest, one of {_choices(PRODUCTS)}.",
         status=f"Status, one of {_choices(STATUSES)}.",
         assigned_to_email="Email address of the person the customer is assigned to.",
         last_contact_date_min=f"Earliest last contact date. {_DATE}",
         last_contact_date_max=f"Latest last contact date. {_DATE}",
         follow_up_by_min=f"Earliest follow-up date. {_DATE}", follow_up_by_max=f"Latest follow-up date. {_DATE}"),
    tool("customer_relationship_manager.update_customer", update_customer,
         "Set one field of the customer record with the given ID to a new value.", side_effects=True,
         customer_id="8-digit ID of the customer.", field=f"Field to update, one of {_choices(UPDATABLE)}.",
         new_value="The new value."),
    tool("customer_relationship_manager.add_customer", add_customer,
         "Add a customer record (customer_name, assigned_to_email and status are required); returns its ID.",
         side_effects=True,
         customer_name="Name of the customer.", assigned_to_email="Email address of the person assigned.",
         status=f"Status, one of {_choices(STATUSES)}.", customer_email="Email address of the customer.",
         customer_phone="Phone number of the customer.", last_contact_date=f"Last contact date. {_DATE}",
         product_interest=f"Product interest, one of {_choices(PRODUCTS)}.", notes="Notes about the customer.",
         follow_up_by=f"Next follow-up date. {_DATE}"),
    tool("customer_relationship_manager.delete_customer", delete_customer,
         "Delete the customer record with the given ID.", side_effects=True,
         customer_id="8-digit ID of the customer."),
]
