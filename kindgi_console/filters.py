"""Filter building blocks shared by every FilterSet of the console (traces/store/filters.py,
kindgi_console/audit/filters.py): row ids, times in UTC, whole days for the pages' date
inputs, the API's "no silently empty filter" and the pages' "a bad value is left out"."""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, cast

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from django_filters.constants import EMPTY_VALUES
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

MAX_ID = 2**63 - 1


#: Empty is no filter, as for every filter of django-filter (a page's filter bar sends its
#: empty inputs): the description says so, or a client that sends it expects a 400.
ID_OR_EMPTY = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_ID}, {"type": "string", "maxLength": 0}]}


@extend_schema_field(ID_OR_EMPTY)
class IdFilter(django_filters.NumberFilter):
    """A row's id: a whole number the database's key can hold (a 400 otherwise, never a 500),
    or empty for no filter."""

    field_class = forms.IntegerField  # type: ignore[assignment]  # whole numbers, not decimals

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, min_value=1, max_value=MAX_ID, **kwargs)


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An RFC 3339 time, compared in UTC (PostgreSQL refuses offsets beyond 15:59)."""

    def filter(self, qs: Any, value: datetime | None) -> Any:
        if value is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError("a time filter is out of range") from None
        return super().filter(qs, value)


class StrictFilterSet(django_filters.FilterSet):
    """A filter given with no value is an error, not silently ignored (a time, a choice)."""

    def is_valid(self) -> bool:
        valid: bool = super().is_valid()
        for name, field in self.filters.items():
            strict = isinstance(field, django_filters.IsoDateTimeFilter | django_filters.ChoiceFilter)
            if strict and (self.data or {}).get(name) == "":
                self.form.add_error(name, "give a value, or leave the parameter out")
                valid = False
        return valid


def day_start(day: date) -> datetime:
    """The first instant of `day` in the console's time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


class DayFilter(django_filters.DateFilter):
    """A whole day of the console's time zone, as a page's date input gives it: `since` from
    the start of the day, `until` (end=True) up to the end of it."""

    def __init__(self, *args: Any, end: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.DateInput(attrs={"type": "date"}))
        super().__init__(*args, **kwargs)
        self.end = end

    def filter(self, qs: Any, value: date | None) -> Any:
        if value in EMPTY_VALUES:
            return qs
        assert value is not None
        if self.end:
            return qs.filter(**{f"{self.field_name}__lt": day_start(value + timedelta(days=1))})
        return qs.filter(**{f"{self.field_name}__gte": day_start(value)})


class PageFilterForm(forms.Form):
    """The form of a page's filter bar (a page FilterSet's): a bad value shows at its field
    and leaves that filter out."""

    def value(self, name: str) -> Any:
        """The field's cleaned value, or None when it is invalid (the error shows at it)."""
        if name in self.errors:
            return None
        return self.cleaned_data.get(name)

    def active(self) -> bool:
        return any(self.value(name) not in (None, "") for name in self.fields)


class PageFilterSet(django_filters.FilterSet):
    """A FilterSet as a page uses it: its form shows each bad value at its field and that
    filter is left out (never an error page); `field_order` orders the filter bar."""

    field_order: tuple[str, ...] = ()
    #: HTML attributes of a field's input (a placeholder, the id of its suggestions' datalist).
    widget_attrs: dict[str, dict[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.field_order:
            self.filters = OrderedDict((name, self.filters[name]) for name in self.field_order)

    def get_form_class(self) -> Any:
        form_class = super().get_form_class()
        for name, attrs in self.widget_attrs.items():
            form_class.base_fields[name].widget.attrs.update(attrs)
        return form_class

    def is_valid(self) -> bool:
        return bool(self.form.is_valid())

    def value(self, name: str) -> Any:
        """A filter's valid value (None when it is bad or missing); validates the form."""
        self.form.is_valid()
        return cast(PageFilterForm, self.form).value(name)

    def apply(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """`queryset` narrowed by the filters whose values are valid."""
        self.form.is_valid()
        return self.filter_queryset(queryset)
