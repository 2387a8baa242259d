"""Histories: the operation model, the durable writer, the reader, Parquet and Jepsen import."""

from histories.contract import OP_TYPES, OpType, Process, check_operation
from histories.edn import EdnReader, Symbol, iter_edn, loads_edn
from histories.errors import (
    EdnError,
    HistoryError,
    HistoryFormatError,
    HistoryWriterClosedError,
    JepsenImportError,
    OperationError,
    PairingError,
)
from histories.jepsen import import_jepsen_history, iter_jepsen_history
from histories.jsonline import encode_line
from histories.merge import iter_merged, merge_events, sut_event
from histories.operation import Operation, make_operation
from histories.pairing import InvocationTracker, Leniency, pair_operations
from histories.parquet import ParquetSummary, read_parquet_tables, write_parquet
from histories.reader import (
    HistoryReader,
    HistoryReadResult,
    TruncatedHistoryWarning,
    TruncatedTail,
    iter_history,
    read_history,
    read_history_result,
)
from histories.validation import check_json_dict
from histories.writer import HistoryWriter, write_history

__all__ = [
    "OP_TYPES",
    "EdnError",
    "EdnReader",
    "HistoryError",
    "HistoryFormatError",
    "HistoryReadResult",
    "HistoryReader",
    "HistoryWriter",
    "HistoryWriterClosedError",
    "InvocationTracker",
    "JepsenImportError",
    "Leniency",
    "OpType",
    "Operation",
    "OperationError",
    "PairingError",
    "ParquetSummary",
    "Process",
    "Symbol",
    "TruncatedHistoryWarning",
    "TruncatedTail",
    "check_json_dict",
    "check_operation",
    "encode_line",
    "import_jepsen_history",
    "iter_edn",
    "iter_history",
    "iter_jepsen_history",
    "iter_merged",
    "loads_edn",
    "make_operation",
    "merge_events",
    "pair_operations",
    "read_history",
    "read_history_result",
    "read_parquet_tables",
    "sut_event",
    "write_history",
    "write_parquet",
]
