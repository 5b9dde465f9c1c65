"""Market Spread: Wallaroo's benchmark application on Kafka and PySpark.

Data flow and folders: sender (services/marketspread/sender) -> Kafka -> Spark job
(spark-app/marketspread_job) -> Kafka -> receiver (services/marketspread/receiver). The fixish
codec (fixish/), the rule (rule.py) and the per-symbol state step (quotes.py) are shared by all.
"""

__version__ = "0.1.0"
