"""What a tenant's report SQL may contain: allowlists, and the checker both SQL layers share.

A report's query is tenant code that runs in Spark, whose SQL can read files (``text.`/path```,
``IDENTIFIER(...)``), call any Java method (``reflect``, ``java_method``), change settings (``SET``) or run
commands. So nothing is refused by pattern: a query is accepted only if every part of it is on a list here.
Two independent layers walk two independent parses of the query with these lists:

* the API (``reports.sqlcheck``: sqlglot's Spark dialect, no JVM in the web tier), so a report that would be
  refused never saves;
* the sandboxed runner (``reports.sandbox.runner``: Spark's own parser, the text Spark will run), so a query
  that sqlglot reads differently from Spark is still refused before Spark analyses it.

Pure data and one pure function over a neutral tree (``Node``), so the rules are tested as tables.

``FUNCTIONS`` is Spark 4's function registry by group: aggregate, array, bitwise, collection, conditional,
conversion, CSV, date/time, generator, hash, JSON, lambda, map, math, predicate, sketch, string, struct, URL
(string parsing only), variant and window functions, plus a few harmless ``misc`` ones. Left out: the rest of
``misc`` (``reflect``, ``java_method``, ``try_reflect``, ``input_file_*``, ``current_user``, ``version``, AES),
XML (``xpath`` parses documents: external entities), Avro and Protobuf (``from_protobuf`` reads a descriptor
file), geospatial and vector functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_FUNCTION_NAMES = """
abs acos acosh add_months aggregate and any any_value approx_count_distinct approx_percentile approx_top_k
approx_top_k_accumulate approx_top_k_combine approx_top_k_estimate array array_agg array_append array_compact
array_contains array_distinct array_except array_insert array_intersect array_join array_max array_min
array_position array_prepend array_remove array_repeat array_size array_sort array_union arrays_overlap
arrays_zip ascii asin asinh assert_true atan atan2 atanh avg base64 between bigint bin binary bit_and bit_count
bit_get bit_length bit_or bit_xor bitmap_and_agg bitmap_bit_position bitmap_bucket_number bitmap_construct_agg
bitmap_count bitmap_or_agg bool_and bool_or boolean bround btrim cardinality cast cbrt ceil ceiling char
char_length character_length chr coalesce collate collation collect_list collect_set concat concat_ws contains
conv convert_timezone corr cos cosh cot count count_if count_min_sketch covar_pop covar_samp crc32 csc cume_dist
curdate current_date current_time current_timestamp current_timezone date date_add date_diff date_format
date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek
dayofyear decimal decode degrees dense_rank div double e element_at elt encode endswith equal_null every exists
exp explode explode_outer expm1 extract factorial filter find_in_set first first_value flatten float floor
forall format_number format_string from_csv from_json from_unixtime from_utc_timestamp get get_json_object
getbit greatest grouping grouping_id hash hex histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union
hll_union_agg hour hypot if ifnull ilike in initcap inline inline_outer instr int is_valid_utf8 is_valid_variant
is_variant_null isnan isnotnull isnull json_array_length json_object_keys json_tuple kll_merge_agg_bigint
kll_merge_agg_double kll_merge_agg_float kll_sketch_agg_bigint kll_sketch_agg_double kll_sketch_agg_float
kll_sketch_get_n_bigint kll_sketch_get_n_double kll_sketch_get_n_float kll_sketch_get_quantile_bigint
kll_sketch_get_quantile_double kll_sketch_get_quantile_float kll_sketch_get_rank_bigint
kll_sketch_get_rank_double kll_sketch_get_rank_float kll_sketch_merge_bigint kll_sketch_merge_double
kll_sketch_merge_float kll_sketch_to_string_bigint kll_sketch_to_string_double kll_sketch_to_string_float
kurtosis lag last last_day last_value lcase lead least left len length levenshtein like listagg ln
localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check make_date make_dt_interval make_interval
make_time make_timestamp make_timestamp_ltz make_timestamp_ntz make_valid_utf8 make_ym_interval map map_concat
map_contains_key map_entries map_filter map_from_arrays map_from_entries map_keys map_values map_zip_with mask
max max_by md5 mean measure median min min_by minute mod mode monotonically_increasing_id month monthname
months_between named_struct nanvl negative next_day not now nth_value ntile nullif nullifzero nvl nvl2
octet_length or overlay parse_json parse_url percent_rank percentile percentile_approx percentile_cont
percentile_disc pi pmod posexplode posexplode_outer position positive pow power printf quarter quote radians
raise_error rand randn random randstr rank reduce regexp regexp_count regexp_extract regexp_extract_all
regexp_instr regexp_like regexp_replace regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2
regr_slope regr_sxx regr_sxy regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim
schema_of_csv schema_of_json schema_of_variant schema_of_variant_agg sec second sentences sequence
session_window sha sha1 sha2 shiftleft shiftright shiftrightunsigned shuffle sign signum sin sinh size skewness
slice smallint some sort_array soundex space spark_partition_id split split_part sqrt stack startswith std
stddev stddev_pop stddev_samp str_to_map string string_agg struct substr substring substring_index sum tan tanh
theta_difference theta_intersection theta_intersection_agg theta_sketch_agg theta_sketch_estimate theta_union
theta_union_agg time time_bucket time_diff time_from_micros time_from_millis time_from_seconds time_to_micros
time_to_millis time_to_seconds time_trunc timestamp timestamp_micros timestamp_millis timestamp_seconds tinyint
to_binary to_char to_csv to_date to_json to_number to_time to_timestamp to_timestamp_ltz to_timestamp_ntz
to_unix_timestamp to_utc_timestamp to_varchar to_variant_object transform transform_keys transform_values
translate trim trunc try_add try_avg try_divide try_element_at try_make_interval try_make_timestamp
try_make_timestamp_ltz try_make_timestamp_ntz try_mod try_multiply try_parse_json try_parse_url try_subtract
try_sum try_to_binary try_to_date try_to_number try_to_time try_to_timestamp try_url_decode try_validate_utf8
try_variant_get tuple_difference_double tuple_difference_integer tuple_difference_theta_double
tuple_difference_theta_integer tuple_intersection_agg_double tuple_intersection_agg_integer
tuple_intersection_double tuple_intersection_integer tuple_intersection_theta_double
tuple_intersection_theta_integer tuple_sketch_agg_double tuple_sketch_agg_integer tuple_sketch_estimate_double
tuple_sketch_estimate_integer tuple_sketch_summary_double tuple_sketch_summary_integer tuple_sketch_theta_double
tuple_sketch_theta_integer tuple_union_agg_double tuple_union_agg_integer tuple_union_double tuple_union_integer
tuple_union_theta_double tuple_union_theta_integer typeof ucase unbase64 unhex uniform unix_date unix_micros
unix_millis unix_seconds unix_timestamp upper url_decode url_encode uuid validate_utf8 var_pop var_samp variance
variant_get weekday weekofyear when width_bucket window window_time xxhash64 year zeroifnull zip_with
"""
FUNCTIONS: frozenset[str] = frozenset(_FUNCTION_NAMES.split())

# Table-valued functions a query may read from (beside the views): numbers only, no I/O.
TABLE_FUNCTIONS: frozenset[str] = frozenset({"range"})

# Logical plan nodes Spark's parser makes for queries (class simple names). Anything else -- commands (SET,
# CREATE, INSERT, ADD JAR, CACHE ...), hints, unresolved identifiers (IDENTIFIER with a non-literal) -- is
# refused.
PLAN_NODES: frozenset[str] = frozenset({
    "Project", "Filter", "Aggregate", "Join", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "Distinct",
    "Union", "Intersect", "Except", "SubqueryAlias", "UnresolvedRelation", "UnresolvedWith", "CTERelationDef",
    "OneRowRelation", "LocalRelation", "UnresolvedInlineTable", "Generate", "WithWindowDefinition", "Window",
    "Sample", "Pivot", "Unpivot", "UnresolvedTableValuedFunction", "RepartitionByExpression", "Expand",
    "Deduplicate", "UnresolvedSubqueryColumnAliases", "UnresolvedHaving", "WithCTE", "Range", "LateralJoin",
    "Root",
})

# Expression nodes Spark's parser makes (operators, literals, references, casts, subqueries, windows,
# lambdas). Functions by name are ``UnresolvedFunction`` (checked against FUNCTIONS), not listed here.
EXPRESSION_NODES: frozenset[str] = frozenset({
    "UnresolvedAttribute", "UnresolvedStar", "UnresolvedAlias", "Alias", "Literal", "UnresolvedFunction",
    "UnresolvedGenerator", "UnresolvedExtractValue", "UnresolvedRegex", "UnresolvedOrdinal",
    "UnresolvedNamedLambdaVariable", "LambdaFunction", "NamedLambdaVariable", "AttributeReference",
    "Add", "Subtract", "Multiply", "Divide", "IntegralDivide", "Remainder", "Pmod", "UnaryMinus",
    "UnaryPositive", "Abs", "And", "Or", "Not", "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual",
    "GreaterThan", "GreaterThanOrEqual", "In", "InSubquery", "ListQuery", "ScalarSubquery", "Exists",
    "LateralSubquery", "IsNull", "IsNotNull", "IsNaN", "Like", "ILike", "RLike", "LikeAll", "NotLikeAll",
    "LikeAny", "NotLikeAny", "CaseWhen", "If", "Cast", "TryCast", "SortOrder", "WindowExpression",
    "WindowSpecDefinition", "WindowSpecReference", "UnresolvedWindowExpression", "SpecifiedWindowFrame",
    "UnspecifiedFrame$", "UnboundedPreceding$", "UnboundedFollowing$", "CurrentRow$", "Concat", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "BitwiseNot", "ShiftLeft", "ShiftRight", "ShiftRightUnsigned", "Cube", "Rollup",
    "GroupingSets", "Grouping", "GroupingID", "Coalesce", "CreateNamedStruct", "CreateArray", "CreateMap",
    "GetStructField", "GetArrayItem", "GetMapValue", "ExtractValue", "Between", "UnresolvedTVFAliases",
    "Extract", "Substring", "Overlay", "Position", "StringTrim", "StringTrimLeft", "StringTrimRight",
    "TimestampAdd", "TimestampDiff", "DatetimeSub", "DateAdd", "DateSub", "TimeAdd", "Interval",
    "MultiAlias", "FilterExpression", "AggregateExpression", "First", "Last", "Count", "Sum", "Average",
    "Min", "Max", "CurrentDate", "CurrentTimestamp", "Now", "LocalTimestamp", "CurrentTimeZone",
    "ArrayExists", "ArrayForAll", "ArrayTransform", "ArrayFilter", "CollateExpression", "Collate",
    "SubtractTimestamps", "SubtractDates", "ParseToDate", "ParseToTimestamp", "StringLocate",
    "Nvl", "Nvl2", "NullIf", "IfNull", "AnyValue", "NamePlaceholder$", "DateAddInterval", "TimestampAddInterval",
    "MakeInterval", "MultiplyInterval", "DivideInterval", "UnaryMinusInterval", "TimestampAddYMInterval",
    "DateAddYMInterval", "InSet", "UpCast", "Upper", "Lower", "OuterReference", "Star",
})


class PolicyError(ValueError):
    """A query part that is not allowed; the message is for the report's author."""


@dataclass(frozen=True, slots=True)
class Node:
    """A neutral tree of a parsed query. ``kind``: "plan" and "expression" (Spark's node classes, checked
    against the lists), "syntax" (a query construct the API's parser allows), "function", "generator",
    "table_function" and "relation" (checked by name parts), "cte" (a name the query defines), "hint" and
    "unknown" (always refused)."""

    kind: str
    name: tuple[str, ...]
    children: tuple[Node, ...] = field(default=())

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


def check(tree: Node, views: Iterable[str]) -> None:
    """Raise ``PolicyError`` for the first part of ``tree`` that is not allowed. ``views``: the temp views
    the report may read (its topics'); a query's own CTE names count as views too."""
    allowed = {v.lower() for v in views}
    ctes = {n.name[0].lower() for n in tree.walk() if n.kind == "cte" and n.name}
    for node in tree.walk():
        label = ".".join(node.name)
        if node.kind == "plan" and node.name[0] not in PLAN_NODES:
            raise PolicyError(f"'{_plan_word(node.name[0])}' is not allowed: a report is one query (SELECT, "
                              "WITH … SELECT, set operations) over its topic views")
        if node.kind == "expression" and node.name[0] not in EXPRESSION_NODES:
            raise PolicyError(f"'{node.name[0]}' is not allowed in a report query")
        if node.kind in ("function", "generator") and (len(node.name) != 1
                                                       or node.name[0].lower() not in FUNCTIONS):
            raise PolicyError(f"function '{label}' is not allowed in a report query")
        if node.kind == "table_function" and (len(node.name) != 1
                                              or node.name[0].lower() not in TABLE_FUNCTIONS):
            raise PolicyError(f"table function '{label}' is not allowed: read the topic views"
                              + (f" ({', '.join(sorted(allowed))})" if allowed else ""))
        if node.kind == "unknown":
            raise PolicyError(f"'{node.name[0]}' is not allowed in a report query")
        if node.kind == "hint":
            raise PolicyError("hints are not allowed in a report query")
        if node.kind == "relation":
            if len(node.name) != 1:
                raise PolicyError(f"'{label}': only the topic views can be read ({', '.join(sorted(allowed))})")
            if node.name[0].lower() not in allowed | ctes:
                raise PolicyError(f"unknown view '{label}': the views are {', '.join(sorted(allowed))} "
                                  "(one per topic in params.topics)")


def _plan_word(cls: str) -> str:
    """A plan class as the author would name it (``SetCommand`` -> ``SET``)."""
    words = {"SetCommand": "SET", "ResetCommand": "RESET", "UnresolvedHint": "hint",
             "PlanWithUnresolvedIdentifier": "IDENTIFIER(…)"}
    return words.get(cls, cls)
